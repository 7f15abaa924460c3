import { defaultPathSerializer } from "openapi-fetch";
import { SignalboxConnectionError, SignalboxProblem } from "./problem.ts";
import { NoAnswerInTime } from "./time-limit.ts";

/** What every openapi-fetch call resolves to. */
export interface FetchResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * Runs one openapi-fetch call and returns its data, or throws: a `SignalboxProblem` for an error
 * answer, else as `sendRequest` does.
 */
export async function unwrap<T>(baseUrl: string, call: () => Promise<FetchResult<T>>, signal?: AbortSignal): Promise<T> {
  const result = await sendRequest(baseUrl, call, signal);
  if (result.response.ok) return result.data as T;
  throw problemFrom(result.response, result.error);
}

/**
 * Runs one openapi-fetch call and returns what it resolves to, or throws a
 * `SignalboxConnectionError` when no answer came (or none within one of the client's own time
 * limits). An abort the caller asked for is passed through unchanged, so `AbortSignal` users see
 * their own `AbortError`; so is an error thrown before the request was made (a header value HTTP
 * cannot carry, a payload JSON cannot hold, a refused path parameter): no reason to try again.
 */
export async function sendRequest<T>(baseUrl: string, call: () => Promise<FetchResult<T>>, signal?: AbortSignal): Promise<FetchResult<T>> {
  const before = requestsMade;
  let made = false;
  try {
    const answer = call();
    // openapi-fetch builds the Request before its first await: by now it exists, or failed.
    made = requestsMade !== before;
    return await answer;
  } catch (err) {
    if (!made || (signal?.aborted && !(signal.reason instanceof NoAnswerInTime))) throw err;
    throw new SignalboxConnectionError(baseUrl, err);
  }
}

let requestsMade = 0;

/** openapi-fetch's Request (its `Request` option), counting the requests made: see `sendRequest`. */
export class CountedRequest extends Request {
  constructor(...args: ConstructorParameters<typeof Request>) {
    super(...args);
    requestsMade++;
  }
}

/**
 * openapi-fetch's path serializer, refusing "." and "..": the URL parser takes them for dot
 * segments, so `/signals/{run}/batch` with run "." would be `POST /signals/batch`, another route.
 */
export function pathSerializer(pathname: string, params: Record<string, unknown>): string {
  for (const [name, value] of Object.entries(params)) {
    if (value === "." || value === "..") throw new TypeError(`${name} must not be "${value}": a URL takes it for a dot segment, another route`);
  }
  return defaultPathSerializer(pathname, params);
}

export function problemFrom(response: Response, error: unknown): SignalboxProblem {
  const retryAfterS = parseRetryAfter(response.headers.get("retry-after"));
  if (error !== null && typeof error === "object" && !Array.isArray(error)) return new SignalboxProblem(response.status, error as Record<string, unknown>, retryAfterS);
  // Not a problem document: something between us and signalbox answered (a proxy, a load balancer).
  const text = typeof error === "string" ? error.trim().slice(0, 200) : "";
  return new SignalboxProblem(response.status, { title: response.statusText || `HTTP ${response.status}`, detail: text }, retryAfterS);
}

/**
 * `Retry-After` as seconds: delay-seconds (a fraction tolerated: "1.5" means what it says) or an
 * HTTP date, whose every form begins with the day's name. Anything else is undefined, so the
 * caller keeps its own backoff: Date.parse reads "1.5" or "-1" as a day in 2001, a retry at once.
 */
export function parseRetryAfter(value: string | null): number | undefined {
  const text = value?.trim() ?? "";
  if (/^\d+(\.\d+)?$/.test(text)) {
    const seconds = Number(text);
    return Number.isFinite(seconds) ? seconds : undefined;
  }
  if (!/^[a-z]{3}/i.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - Date.now()) / 1000);
}
