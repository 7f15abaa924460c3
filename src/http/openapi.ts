import { z } from "@hono/zod-openapi";
import type { Hook } from "@hono/zod-openapi";
import type { Env } from "hono";
import type { ZodError } from "zod";
import { escapePointer } from "../core/json-pointer.ts";
import { RUN_ID, SIGNAL_NAME } from "../core/names.ts";
import { badRequest, ProblemSchema, problemResponse } from "./problem.ts";

/**
 * A problem+json response. Every error response in the document is made here, so they all share
 * one media type and the Problem shape (a route may pass an extension of ProblemSchema).
 */
export const problem = (description: string, schema: z.ZodTypeAny = ProblemSchema) => ({
  description,
  content: { "application/problem+json": { schema } },
});
/** A problem the client should retry, with the Retry-After header that says when. */
function retryLater(description: string) {
  return {
    ...problem(description),
    headers: { "Retry-After": { description: "Seconds to wait before retrying", schema: { type: "integer" as const, minimum: 0 } } },
  };
}
/** Shared problem responses, spread into every route so the document lists what can happen. */
export const problems = {
  400: problem("Malformed request: path, query or body"),
  401: problem("Missing or invalid credentials"),
  404: problem("No such resource"),
  409: problem("Conflicts with the current state"),
  413: problem("Body larger than SIGNALBOX_MAX_BODY_BYTES"),
  422: problem("A payload that breaks its schema, or an invalid JSON Schema"),
  500: problem("Unexpected server error (the detail carries only the request id)"),
  503: retryLater("The database is unavailable for now, or (long-polls, event streams) too many requests are held open: retry after Retry-After"),
  429: retryLater("Too many requests from this client address or to this signal type (SIGNALBOX_RATE_LIMIT_*): retry after Retry-After"),
};
/** Every route that reads or writes the database may answer these. */
export const commonProblems = { 400: problems[400], 401: problems[401], 500: problems[500], 503: problems[503] };

export const bearerSecurity = [{ bearerAuth: [] as string[] }];
/** Public operations (health, metrics): no credentials, said explicitly. */
export const noSecurity: Array<Record<string, string[]>> = [];

export const RunIdSchema = z
  .string()
  .regex(RUN_ID, "must be 1 to 200 characters from A-Z a-z 0-9 . _ : @ -, and not . or ..")
  .openapi({ example: "order-17" });
/**
 * A wait's metadata as a client gives it. `__proto__` is refused as a key: zod leaves it out of
 * the object it builds (assigned, it would set the prototype), so it was dropped without a word.
 */
export const MetadataInput = z.preprocess((value, ctx) => {
  if (typeof value === "object" && value !== null && Object.hasOwn(value, "__proto__")) {
    ctx.addIssue({ code: "custom", message: "'__proto__' cannot be a metadata key", input: value });
  }
  return value;
}, z.record(z.string(), z.unknown()));

/** Whether percent-encoded text decodes (a URL's user and password are sent decoded, as Basic auth). */
function decodes(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}

/** An http(s) URL signalbox will POST to (a callback, a notification, a run start). */
export const HttpUrlInput = () =>
  z
    .string()
    .url()
    .max(2000)
    .regex(/^[Hh][Tt][Tt][Pp][Ss]?:\/\//, "must be an http(s) URL")
    .refine((u) => {
      const url = URL.parse(u);
      return url !== null && decodes(url.username) && decodes(url.password);
    }, "its user and password must be valid percent-encoding (they are sent as Basic auth)");

/** An instant a client gives (RFC 3339): also within the years 0001 to 9999 (UTC), which Postgres can store. */
export const InstantInput = z
  .string()
  .datetime({ offset: true })
  .refine((s) => {
    const year = new Date(s).getUTCFullYear();
    return year >= 1 && year <= 9999;
  }, "must be between the years 0001 and 9999");

export const SignalNameSchema = z
  .string()
  .regex(SIGNAL_NAME, "must be 1 to 100 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit")
  .openapi({ example: "manager-approval" });
export const WaitIdSchema = z.string().min(1).max(100).openapi({ example: "wt_01jb2m3k4n5p6q7r8s9t0v1w2x3y" });

/** `?wait_s=`: how long a long-poll may hold the request (seconds, decimals allowed; 0 answers at once). */
export const holdQuery = (maxS: number, whileWhat: string) =>
  z.coerce.number().min(0).max(maxS).optional().openapi({ description: `Hold up to this many seconds (max ${maxS}) while ${whileWhat}` });

export const LimitQuery = z.coerce.number().int().min(1).max(500).default(50).openapi({ description: "Page size (max 500)", example: 50 });
export const CursorQuery = z.string().max(400).optional().openapi({ description: "next_cursor from the previous page" });

export const listOf = <T extends z.ZodTypeAny>(item: T, name: string) =>
  z.object({ items: z.array(item), next_cursor: z.string().nullable() }).openapi(name);

export const json = <T extends z.ZodTypeAny>(schema: T, description: string) => ({
  description,
  content: { "application/json": { schema } },
});

/** Turns zod failures into problem+json 400s with every violation as a JSON Pointer. */
export function zodIssues(error: ZodError) {
  const pointer = (path: readonly PropertyKey[]) => (path.length === 0 ? "" : "/" + path.map((p) => escapePointer(String(p))).join("/"));
  // An unknown key is reported where it is (`/auth/colour`), one entry per key, not at its parent.
  return error.issues
    .flatMap((i) =>
      i.code === "unrecognized_keys"
        ? i.keys.map((k) => ({ path: pointer([...i.path, k]), message: "is not a known field" }))
        : [{ path: pointer(i.path), message: i.message }],
    )
    .slice(0, 20);
}

export const defaultHook: Hook<unknown, Env, string, unknown> = (result, c) => {
  if (!result.success) {
    const issues = zodIssues(result.error as ZodError);
    const where = result.target === "json" ? "body" : result.target;
    const summary = issues.map((i) => `${i.path || "(root)"}: ${i.message}`).join("; ");
    return problemResponse(c, badRequest(`invalid ${where}: ${summary}`, issues));
  }
  return undefined;
};
