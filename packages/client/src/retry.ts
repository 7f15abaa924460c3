import { SignalboxConnectionError, SignalboxProblem } from "./problem.ts";

export interface RetryOptions {
  /** Attempts in all, the first included (default 5): a whole number 1 or more, or Infinity. 1 turns retrying off. */
  attempts?: number;
  /** Pause before the second attempt; it doubles each time (default 250 ms). */
  baseDelayMs?: number;
  /** Longest pause between two attempts, `Retry-After` included (default 5000 ms). */
  maxDelayMs?: number;
}

/**
 * Failures after which sending the same request again is safe and may succeed: no answer at
 * all, or the service (or a gateway in front of it) saying it is briefly unavailable. Anything
 * else is an answer about the request itself, and repeating it would get the same answer.
 */
export function isTransient(err: unknown): boolean {
  if (err instanceof SignalboxConnectionError) return true;
  return err instanceof SignalboxProblem && (err.status === 502 || err.status === 503 || err.status === 504);
}

/**
 * Calls `attempt` until it succeeds, fails with a non-transient error, or runs out of attempts.
 * Only for requests that are idempotent (the caller guarantees it, e.g. with an idempotency key).
 * Throws `TypeError` for `attempts` that are not a whole number 1 or more (or Infinity).
 */
export async function withRetries<T>(attempt: () => Promise<T>, opts: RetryOptions = {}, signal?: AbortSignal): Promise<T> {
  const attempts = opts.attempts ?? 5;
  // `n >= NaN` is never true: a NaN (say, Number() of an unset variable) would retry for ever.
  if (!(Number.isInteger(attempts) && attempts >= 1) && attempts !== Infinity) throw new TypeError(`retry.attempts must be a whole number, 1 or more (got ${attempts})`);
  const base = opts.baseDelayMs ?? 250;
  const max = opts.maxDelayMs ?? 5000;
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (n >= attempts || !isTransient(err) || signal?.aborted) throw err;
      // Half fixed, half random: many clients failing at once do not all come back at once.
      const backoff = base * 2 ** (n - 1);
      await pause(delayAfter(err, backoff / 2 + Math.random() * (backoff / 2), max), signal);
    }
  }
}

/**
 * The pause before trying again after `err`: what the server asked for (`Retry-After`: a 503
 * when its held requests are at their cap says 1 s), else the caller's own backoff; at most `maxMs`.
 */
export function delayAfter(err: unknown, backoffMs: number, maxMs: number): number {
  const asked = err instanceof SignalboxProblem && err.retryAfterS !== undefined ? err.retryAfterS * 1000 : undefined;
  return Math.min(maxMs, asked ?? backoffMs);
}

export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
