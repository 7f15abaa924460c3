import { WaitTimeoutError } from "./problem.ts";
import { delayAfter, isTransient, pause } from "./retry.ts";
import { timeLimit } from "./time-limit.ts";
import type { Wait } from "./types.ts";

export interface WaitForOptions {
  /** Give up (with `WaitTimeoutError`) when the wait is still `waiting` after this long. */
  timeoutMs: number;
  signal?: AbortSignal;
}

/** The longest a single long-poll is held by the server (`wait_s`, API.md). */
const MAX_HOLD_S = 60;

/** How long past its hold a long-poll's answer may take before the request is given up on. */
const ANSWER_MARGIN_MS = 3000;

/**
 * Long-polls `GET /waits/{id}?wait_s=` until the wait leaves `waiting`: each request is held by
 * the server until the wait changes or its hold ends, so a resolution is seen at once, with one
 * request a minute while nothing happens. Network errors and 503s (a restart, a full hold
 * budget) are retried until the deadline, after the `Retry-After` a 503 gives; any other error
 * is thrown. A request with no answer by its hold plus a margin (a server that accepted the
 * connection and froze) is a network error too: past the deadline its `SignalboxConnectionError`
 * is thrown, not `WaitTimeoutError`, which says the wait was read and still waiting.
 */
export async function waitForWait(get: (waitS: number, signal?: AbortSignal) => Promise<Wait>, o: WaitForOptions): Promise<Wait> {
  const deadline = performance.now() + o.timeoutMs;
  let failures = 0;
  for (;;) {
    const holdS = Math.min(MAX_HOLD_S, Math.max(0, (deadline - performance.now()) / 1000));
    const limit = timeLimit(holdS * 1000 + ANSWER_MARGIN_MS, o.signal);
    let wait: Wait;
    try {
      wait = await get(holdS, limit.signal);
      failures = 0;
    } catch (err) {
      if (!isTransient(err) || o.signal?.aborted || performance.now() >= deadline) throw err;
      failures++;
      await pause(Math.min(delayAfter(err, 250 * 2 ** (failures - 1), 5000), Math.max(0, deadline - performance.now())), o.signal);
      continue;
    } finally {
      limit.clear();
    }
    if (wait.status !== "waiting") return wait;
    if (performance.now() >= deadline) throw new WaitTimeoutError(wait, o.timeoutMs);
  }
}
