import { sql, type SQL } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

/** The graphile-worker tasks signalbox defines; the task list in worker/tasks.ts maps each to a verb. */
export type TaskName = "expire_wait" | "expire_due" | "deliver_callback" | "fire_timer" | "poll_sensor" | "deliver_notification" | "deliver_start" | "sweep" | "purge_old_records";

/** graphile-worker attempts of every job (signalbox.job_max_attempts() in SQL; a test proves them equal). */
export const JOB_MAX_ATTEMPTS = 25;

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
 * through signalbox.add_job(s) (db/functions/add_job.sql): graphile-worker's functions run with generic
 * plans there, about half the cost of re-planning them on every call.
 */
export async function addJob(tx: Queryable, task: TaskName, payload: Record<string, unknown>, opts: JobOptions = {}) {
  const rows = await tx.execute<{ id: string | null }>(sql`
    select id from signalbox.add_job(
      ${task}::text,
      ${JSON.stringify(payload)}::json,
      ${opts.runAt ?? sql`now()`},
      ${opts.maxAttempts ?? JOB_MAX_ATTEMPTS}::int,
      ${opts.jobKey ?? null}::text,
      ${opts.jobKeyMode ?? "replace"}::text)`);
  // graphile/worker#580: under contention on one key add_job can return a null row; retry the tx.
  if (!rows[0]?.id) throw Object.assign(new Error("add_job returned no job"), { code: "40001" });
}

/**
 * Job keys: one pending job per key. The SQL functions use signalbox.job_key (db/functions/
 * constants.sql) for the same keys; test/waits/shared-constants.test.ts proves them equal.
 */
export const jobKeys = {
  expire: (waitId: string) => `expire:${waitId}`,
  deliver: (waitId: string) => `deliver:${waitId}`,
  timer: (waitId: string) => `timer:${waitId}`,
  sensor: (waitId: string) => `sensor:${waitId}`,
  notify: (notificationId: string) => `notify:${notificationId}`,
  start: (runId: string) => `start:${runId}`,
};

export interface JobSpec {
  task: TaskName;
  payload: unknown;
  /** Seconds from now (database clock); 0: now. */
  inS: number;
  jobKey?: string;
}

/**
 * Enqueues many jobs in one statement (one graphile-worker add_jobs, one NOTIFY), through the
 * caller's transaction or as a statement of its own. A key already pending is replaced, as
 * add_job does.
 */
export async function addJobs(tx: Queryable, specs: JobSpec[]): Promise<void> {
  if (specs.length === 0) return;
  const rows = await tx.execute<{ n: number }>(sql`
    select count(*)::int as n from signalbox.add_jobs(array(
      select row(t.task, t.payload, null, now() + t.in_s * interval '1 second', ${JOB_MAX_ATTEMPTS}::int2, t.job_key, null, null)::graphile_worker.job_spec
      from json_to_recordset(${JSON.stringify(specs.map((s) => ({ task: s.task, payload: s.payload, in_s: s.inS, job_key: s.jobKey ?? null })))}::json)
        as t(task text, payload json, in_s double precision, job_key text)))`);
  // graphile/worker#580: under contention on one key add_jobs can leave a job out; retry the statement.
  if (Number(rows[0]?.n) !== specs.length) throw Object.assign(new Error("add_jobs returned fewer jobs"), { code: "40001" });
}

/** Job ids (bigint) as one SQL array parameter, whatever their number. */
export const jobIdArray = (ids: string[]): SQL => sql`array(select json_array_elements_text(${JSON.stringify(ids)}::json)::bigint)`;

/**
 * Completes callback jobs this process ran itself (CallbackHandOff) that left nothing to record
 * (signalbox.complete_handed_off: deleted unless a worker has locked one meanwhile); those that
 * did are completed with their record (recordAttempts). Committed without waiting for the WAL
 * to reach disk (synchronous_commit off, for this transaction only): a completion lost in a
 * crash only lets the job run again, and it finds its callbacks settled (let go of to jobs of
 * their own, or no longer owed); a flush of its own was most of what it cost.
 */
export async function completeHandedOff(q: Queryable, jobIds: string[]): Promise<void> {
  if (jobIds.length === 0) return;
  await q.execute(sql`
    with unflushed as (select set_config('synchronous_commit', 'off', true))
    select (select count(*) from unflushed) as unflushed, signalbox.complete_handed_off(${jobIdArray(jobIds)}) as completed`);
}
