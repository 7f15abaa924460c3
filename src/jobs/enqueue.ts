import { sql, type SQL } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

/** The graphile-worker tasks signalbox defines; the task list in worker/tasks.ts maps each to a verb. */
export type TaskName = "expire_wait" | "deliver_callback" | "fire_timer" | "poll_sensor" | "deliver_notification" | "sweep" | "purge_old_records";

export interface JobOptions {
  /** When to run; a SQL expression so deadlines stay on the database clock. Default: now. */
  runAt?: SQL;
  jobKey?: string;
  maxAttempts?: number;
  /** "preserve_run_at" keeps an earlier pending run time for the same key. */
  jobKeyMode?: "replace" | "preserve_run_at";
}

/**
 * Enqueues a job through the caller's transaction, so the job exists if and only if the
 * state change that needs it commits. The only place that writes graphile_worker SQL. It goes
 * through signalbox.add_job(s) (migration 0006): graphile-worker's functions run with generic
 * plans there, about half the cost of re-planning them on every call.
 */
export async function addJob(tx: Queryable, task: TaskName, payload: Record<string, unknown>, opts: JobOptions = {}) {
  const rows = await tx.execute<{ id: string | null }>(sql`
    select id from signalbox.add_job(
      ${task}::text,
      ${JSON.stringify(payload)}::json,
      ${opts.runAt ?? sql`now()`},
      ${opts.maxAttempts ?? 25}::int,
      ${opts.jobKey ?? null}::text,
      ${opts.jobKeyMode ?? "replace"}::text)`);
  // graphile/worker#580: under contention on one key add_job can return a null row; retry the tx.
  if (!rows[0]?.id) throw Object.assign(new Error("add_job returned no job"), { code: "40001" });
}

/**
 * Enqueues one job per id through one `add_jobs` call: one statement and one NOTIFY for any
 * number of waits (a burst of 10,000 timeouts queues its callbacks in a few batches).
 */
export async function addJobsForIds(tx: Queryable, task: TaskName, ids: string[], keyPrefix: string) {
  if (ids.length === 0) return;
  await tx.execute(sql`
    select count(*) from signalbox.add_jobs(array(
      select json_populate_record(null::graphile_worker.job_spec,
        json_build_object('identifier', ${task}::text, 'payload', json_build_object('id', ids.id),
                          'job_key', ${keyPrefix}::text || ids.id, 'max_attempts', 25))
      from json_array_elements_text(${JSON.stringify(ids)}::json) as ids(id)))`);
}

/**
 * Removes pending jobs by key. A job already running is not stopped (graphile-worker cannot);
 * every task is a compare-and-set on our rows, so a late one changes nothing.
 */
export async function removeJobs(tx: Queryable, keys: string[]) {
  if (keys.length === 0) return;
  await tx.execute(sql`
    select graphile_worker.remove_job(k) from json_array_elements_text(${JSON.stringify(keys)}::json) as k`);
}

export const jobKeys = {
  expire: (waitId: string) => `expire:${waitId}`,
  deliver: (waitId: string) => `deliver:${waitId}`,
  timer: (waitId: string) => `timer:${waitId}`,
  sensor: (waitId: string) => `sensor:${waitId}`,
  notify: (notificationId: string) => `notify:${notificationId}`,
};
