import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import { addJob } from "../jobs/enqueue.ts";

/** One key: one pending retention job for all processes sharing the database. */
export const PURGE_JOB_KEY = "retention";
/** How long the retention job rests once it has caught up (it continues at once while work is left). */
export const PURGE_INTERVAL_S = 600;
/** How soon it looks again after standing down for another holder of its lock. */
const PURGE_BUSY_RETRY_S = 1;

/** When the next run is due, after a run that reported this. */
export const nextPurgeInS = (run: { more: boolean; busy: boolean }) => (run.busy ? PURGE_BUSY_RETRY_S : run.more ? 0 : PURGE_INTERVAL_S);

/**
 * Schedules the retention job `inS` seconds from now. It reschedules itself after every run;
 * the sweep (which every live process keeps scheduled) calls this with `keepEarlier`, so the
 * chain is started on a new database and restarted if it was ever lost, without pulling a
 * pending run forward. A job survives restarts: it is a row in graphile_worker's table.
 */
export async function schedulePurge(q: Queryable, inS: number, keepEarlier: boolean): Promise<void> {
  await addJob(q, "purge_old_records", {}, {
    runAt: sql`now() + ${inS}::double precision * interval '1 second'`,
    jobKey: PURGE_JOB_KEY,
    jobKeyMode: keepEarlier ? "preserve_run_at" : "replace",
  });
}
