import type { IntakeOutcome, ValidationIssue, Wait } from "./types.ts";

/**
 * signalbox answered with an error: the RFC 9457 problem it sent (`application/problem+json`),
 * or one made from the status line when something in between answered (a proxy's 502 page).
 */
export class SignalboxProblem extends Error {
  override readonly name = "SignalboxProblem";
  /** HTTP status. */
  readonly status: number;
  /** Problem type URI. */
  readonly type: string;
  readonly title: string;
  readonly detail: string;
  /** Intake only (`POST /signals/{run}/{signal}`): why the signal was refused. */
  readonly outcome: IntakeOutcome | undefined;
  /** Where the input broke its schema (JSON Pointers), when it did; at most 20. */
  readonly validation_errors: ValidationIssue[];
  /** The server's request id, to find its log line. */
  readonly request_id: string | undefined;
  /** Seconds the server asked to wait before trying again (`Retry-After`), if it said. */
  readonly retryAfterS: number | undefined;
  /** The whole problem body as received. */
  readonly body: Record<string, unknown>;

  constructor(status: number, body: Record<string, unknown>, retryAfterS?: number) {
    const title = typeof body.title === "string" ? body.title : `HTTP ${status}`;
    const detail = typeof body.detail === "string" ? body.detail : "";
    super(detail ? `${status} ${title}: ${detail}` : `${status} ${title}`);
    this.status = status;
    this.type = typeof body.type === "string" ? body.type : "about:blank";
    this.title = title;
    this.detail = detail;
    this.outcome = typeof body.outcome === "string" ? (body.outcome as IntakeOutcome) : undefined;
    this.validation_errors = Array.isArray(body.validation_errors) ? (body.validation_errors as ValidationIssue[]) : [];
    this.request_id = typeof body.request_id === "string" ? body.request_id : undefined;
    this.retryAfterS = retryAfterS;
    this.body = body;
  }
}

/** No answer from signalbox: refused, reset, DNS, TLS or aborted by a time limit. `cause` says which. */
export class SignalboxConnectionError extends Error {
  override readonly name = "SignalboxConnectionError";
  constructor(url: string, cause: unknown) {
    super(`signalbox unreachable at ${url}: ${describeCause(cause)}`, { cause });
  }
}

/** `waits.waitFor` gave up: the wait was still `waiting` when `timeoutMs` ran out. */
export class WaitTimeoutError extends Error {
  override readonly name = "WaitTimeoutError";
  /** The wait as last read (status `waiting`). */
  readonly wait: Wait;
  constructor(wait: Wait, timeoutMs: number) {
    super(`wait ${wait.id} still waiting after ${timeoutMs} ms`);
    this.wait = wait;
  }
}

/** The socket error's code (ECONNREFUSED), else its message. */
export function describeCause(cause: unknown): string {
  // fetch wraps the socket error: "fetch failed" says nothing, its cause says ECONNREFUSED.
  const inner = (cause as { cause?: unknown })?.cause ?? cause;
  const e = inner as { code?: string; message?: string };
  return e?.code ?? e?.message ?? String(inner);
}
