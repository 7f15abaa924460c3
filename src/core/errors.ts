/** One error hierarchy for every verb; `app.onError` turns each into application/problem+json. */
export interface ValidationIssue {
  path: string; // JSON Pointer into the offending document, "" for the root
  message: string;
}

export class ServiceError extends Error {
  readonly status: number;
  readonly title: string;
  readonly type: string;
  readonly extra: Record<string, unknown>;
  constructor(status: number, title: string, detail: string, extra: Record<string, unknown> = {}) {
    super(detail);
    this.status = status;
    this.title = title;
    this.type = `https://signalbox.dev/problems/${title.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
    this.extra = extra;
  }
}

export class BadRequestError extends ServiceError {
  constructor(detail: string, validationErrors?: ValidationIssue[], extra: Record<string, unknown> = {}) {
    super(400, "Bad Request", detail, validationErrors ? { validation_errors: validationErrors, ...extra } : extra);
  }
}
export class NotFoundError extends ServiceError {
  constructor(detail: string, extra: Record<string, unknown> = {}) {
    super(404, "Not Found", detail, extra);
  }
}
export class ConflictError extends ServiceError {
  constructor(detail: string, extra: Record<string, unknown> = {}) {
    super(409, "Conflict", detail, extra);
  }
}
export class UnprocessableError extends ServiceError {
  constructor(detail: string, validationErrors: ValidationIssue[], extra: Record<string, unknown> = {}) {
    super(422, "Unprocessable Content", detail, { validation_errors: validationErrors, ...extra });
  }
}
export class UnauthorizedError extends ServiceError {
  constructor(detail = "missing or invalid credentials", extra: Record<string, unknown> = {}) {
    super(401, "Unauthorized", detail, extra);
  }
}
export class PayloadTooLargeError extends ServiceError {
  constructor(detail: string, extra: Record<string, unknown> = {}) {
    super(413, "Payload Too Large", detail, extra);
  }
}
/** A dependency (the database) cannot serve the request now; the caller should retry after `retryAfterS`. */
export class ServiceUnavailableError extends ServiceError {
  readonly retryAfterS: number;
  constructor(detail: string, retryAfterS = 1, extra: Record<string, unknown> = {}) {
    super(503, "Service Unavailable", detail, extra);
    this.retryAfterS = retryAfterS;
  }
}
