/** Delays end on a boundary of this many milliseconds; all those ending on one share a timer. */
const SLICE_MS = 50;
const slices = new Map<number, Promise<void>>();

/**
 * Resolves after at least `ms` (and at most SLICE_MS more), on a timer shared with every other
 * delay that ends in the same slice. Thousands of requests in flight each needing a time limit
 * then cost a handful of timers, not one each: in a burst of 10,000 callbacks, a timer and a
 * composite abort signal per request were a tenth of the service's CPU. Never keeps the process
 * alive on its own (the timer is unref'd), and cannot be cancelled: a caller that no longer
 * cares ignores it.
 */
export function coarseDelay(ms: number): Promise<void> {
  const slice = Math.ceil((Date.now() + ms) / SLICE_MS);
  let delay = slices.get(slice);
  if (!delay) {
    delay = new Promise<void>((resolve) => {
      setTimeout(() => {
        slices.delete(slice);
        resolve();
      }, slice * SLICE_MS - Date.now()).unref();
    });
    slices.set(slice, delay);
  }
  return delay;
}
