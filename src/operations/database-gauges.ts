import { sql } from "drizzle-orm";
import type { Deps } from "../deps.ts";
import { coarseDelay } from "../core/coarse-delay.ts";
import type { Metrics } from "../core/metrics.ts";

/** How long counted gauges are served before the database is asked again (scrapers poll far less often). */
export const GAUGES_MAX_AGE_MS = 5_000;
/**
 * How long a scrape waits for the count before it is served the last values: a database that
 * stopped answering (frozen, cut off, a table locked) must not hang /metrics, which tells of it.
 */
export const GAUGES_WAIT_MS = 1_000;

/**
 * Gauges that count rows cover every process, so they are read from the database; /metrics is
 * public, so at most once per GAUGES_MAX_AGE_MS whatever the scrape rate, and concurrent
 * scrapes share one read. A read still under way after GAUGES_WAIT_MS goes on by itself (no
 * second one starts beside it); scrapes meanwhile get the last values.
 */
export function databaseGauges(deps: Pick<Deps, "db" | "log">, metrics: Metrics, now = () => Date.now()) {
  let readAt = -Infinity;
  let reading: Promise<void> | undefined;
  /** What scrapes wait for: the read in flight, for at most GAUGES_WAIT_MS. */
  let waiting: Promise<void> = Promise.resolve();

  async function read(): Promise<void> {
    const waits = await deps.db.execute<{ status: string; n: number }>(sql`
      select status, count(*)::int as n from signalbox.waits group by status`);
    const counts = Object.fromEntries(waits.map((r) => [r.status, Number(r.n)]));
    metrics.waitsOpen.set(counts.waiting ?? 0);
    for (const outcome of ["received", "timed_out", "cancelled"]) metrics.waitsResolved.set({ outcome }, counts[outcome] ?? 0);
    const [jobs] = await deps.db.execute<{ n: number }>(sql`select count(*)::int as n from graphile_worker.jobs`);
    metrics.jobQueueDepth.set(Number(jobs?.n ?? 0));
  }

  /** Brings the gauges up to date if they are older than the limit; never throws (the last values stay). */
  return function refresh(): Promise<void> {
    if (now() - readAt < GAUGES_MAX_AGE_MS) return Promise.resolve();
    if (!reading) {
      reading = read()
        .then(() => void (readAt = now()))
        .catch((err) => deps.log.warn({ err }, "metrics: database gauges unavailable"))
        .finally(() => (reading = undefined));
      waiting = Promise.race([reading, coarseDelay(GAUGES_WAIT_MS)]);
    }
    return waiting;
  };
}
