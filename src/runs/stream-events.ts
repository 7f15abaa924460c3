import type { Deps } from "../deps.ts";
import type { ChangeFeed } from "../events/change-feed.ts";
import { listRunEvents, toEventResource } from "../events/events.queries.ts";

export type EventResource = ReturnType<typeof toEventResource>;
const BATCH = 500;

/**
 * The run's history after `afterId`, then live events as they commit, oldest first with no
 * gaps or repeats (ids only grow). Yields `null` when `heartbeatMs` passes quietly, so the
 * caller can keep proxies from closing the connection. Ends when `signal` aborts.
 */
export async function* streamRunEvents(
  deps: Pick<Deps, "db"> & { changes: ChangeFeed },
  runId: string,
  afterId: number,
  heartbeatMs: number,
  signal: AbortSignal,
): AsyncGenerator<EventResource | null> {
  let after = afterId;
  while (!signal.aborted) {
    const watch = deps.changes.watch(`run:${runId}`, signal); // register before reading: no lost wake-up
    try {
      const rows = await listRunEvents(deps.db, runId, after, BATCH);
      for (const row of rows.slice(0, BATCH)) {
        after = row.id;
        yield toEventResource(row);
      }
      if (rows.length > BATCH) continue; // more history to send before waiting
      let timer: NodeJS.Timeout | undefined;
      const quiet = await Promise.race([
        watch.changed.then(() => false),
        new Promise<boolean>((r) => (timer = setTimeout(() => r(true), heartbeatMs))),
      ]);
      clearTimeout(timer);
      if (quiet && !signal.aborted) yield null;
    } finally {
      watch.stop();
    }
  }
}
