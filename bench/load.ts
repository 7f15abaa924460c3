import { now } from "./stats.ts";

export interface LoadResult {
  ok: number;
  failed: number;
  /** From the first request sent to the last answer received. */
  elapsedMs: number;
  /** Per successful operation, request sent → answer received. */
  latenciesMs: number[];
  errors: Map<string, number>;
}

function recordError(errors: Map<string, number>, err: unknown) {
  const message = (err instanceof Error ? err.message : String(err)).slice(0, 200);
  errors.set(message, (errors.get(message) ?? 0) + 1);
}

/**
 * Closed loop: `concurrency` workers each send the next operation as soon as their previous one
 * answered, until `durationMs` has passed or `limit` operations were started. `op` throws on a
 * wrong answer.
 */
export async function closedLoop(opts: { concurrency: number; durationMs: number; limit?: number; op: (i: number) => Promise<void> }): Promise<LoadResult> {
  const result: LoadResult = { ok: 0, failed: 0, elapsedMs: 0, latenciesMs: [], errors: new Map() };
  const limit = opts.limit ?? Infinity;
  const started = now();
  const end = started + opts.durationMs;
  let next = 0;
  const worker = async () => {
    while (next < limit && now() < end) {
      const i = next++;
      const t0 = now();
      try {
        await opts.op(i);
        result.latenciesMs.push(now() - t0);
        result.ok++;
      } catch (err) {
        result.failed++;
        recordError(result.errors, err);
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  result.elapsedMs = now() - started;
  return result;
}

/**
 * Open loop: operation i is sent at start + i / rate, whether or not earlier ones have answered
 * (a slow server does not slow the offered load down). Reports how far behind schedule the
 * sender itself fell, which would make the offered rate a lie.
 */
export async function openLoop(opts: { ratePerS: number; count: number; op: (i: number) => Promise<void> }): Promise<LoadResult & { maxSendLagMs: number }> {
  const result: LoadResult = { ok: 0, failed: 0, elapsedMs: 0, latenciesMs: [], errors: new Map() };
  const interval = 1000 / opts.ratePerS;
  const started = now();
  const inFlight: Promise<void>[] = [];
  let maxSendLagMs = 0;
  let i = 0;
  while (i < opts.count) {
    const due = started + i * interval;
    const wait = due - now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    // Send everything that is due now (timers are coarse; never fall behind the schedule).
    while (i < opts.count && started + i * interval <= now() + 0.5) {
      maxSendLagMs = Math.max(maxSendLagMs, now() - (started + i * interval));
      const index = i++;
      const t0 = now();
      inFlight.push(
        opts.op(index).then(
          () => {
            result.latenciesMs.push(now() - t0);
            result.ok++;
          },
          (err) => {
            result.failed++;
            recordError(result.errors, err);
          },
        ),
      );
    }
  }
  await Promise.all(inFlight);
  result.elapsedMs = now() - started;
  return { ...result, maxSendLagMs };
}
