import { SignalboxConnectionError, SignalboxProblem } from "./problem.ts";

/** What every openapi-fetch call resolves to. */
export interface FetchResult<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

/**
 * Runs one openapi-fetch call and returns its data, or throws: a `SignalboxProblem` for an error
 * answer, a `SignalboxConnectionError` when no answer came. An abort the caller asked for is
 * passed through unchanged, so `AbortSignal` users see their own `AbortError`.
 */
export async function unwrap<T>(baseUrl: string, call: () => Promise<FetchResult<T>>, signal?: AbortSignal): Promise<T> {
  let result: FetchResult<T>;
  try {
    result = await call();
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new SignalboxConnectionError(baseUrl, err);
  }
  if (result.response.ok) return result.data as T;
  throw problemFrom(result.response, result.error);
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
