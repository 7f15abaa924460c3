import type postgres from "postgres";
import { vi } from "vitest";
import { Logger, runOnce, type TaskList } from "graphile-worker";
import { retryingRollbacks } from "../../src/db/transaction.ts";
import { taskList } from "../../src/worker/tasks.ts";
import type { TestApp } from "./test-app.ts";

/**
 * The test's clock for deadlines. signalbox compares every deadline with the database's now():
 * a wait's timeout_at and fires_at, a buffered signal's buffer_expires_at, a replay receipt's
 * expires_at, a reminder's due time, and graphile-worker's run_at of the job that acts on each.
 * Moving all of those back by `seconds` is, for everything signalbox decides, the same as
 * `seconds` passing, so a 30-second timeout fires in milliseconds and a test sees exactly what
 * fell due fire, and nothing else.
 *
 * What stays on the wall clock: the sweep and the retention purge (housekeeping on their own
 * timers, so advancing never runs them early), heartbeats, created_at/resolved_at history, a
 * long-poll's wait_s (a timer in the process), and what the process checks against its own clock
 * (an approval link's `exp`, a signature's timestamp): move that one with withProcessClockAhead.
 *
 * With a worker running, it is woken (NOTIFY "jobs:insert", as add_job does) so what fell due
 * runs now rather than at its next poll; wait for the outcome (an event, a callback) as usual.
 * Without one (`startTestApp({ worker: false })`), call `runDueJobs`.
 */
export async function advanceClock(app: TestApp | postgres.Sql, seconds: number): Promise<void> {
  const sql = "database" in app ? app.database.sql : app;
  // It moves every open deadline and job at once, beside the service's own transactions (a
  // timeout job deleting the jobs of the waits it takes): Postgres may pick it as a deadlock's
  // victim. Rolled back whole, it is run again, as the service's transactions are.
  await retryingRollbacks(() => sql.begin(async (tx) => {
    const by = tx`${seconds}::double precision * interval '1 second'`;
    await tx`update signalbox.waits set timeout_at = timeout_at - ${by} where status = 'waiting' and timeout_at is not null`;
    await tx`update signalbox.waits set fires_at = fires_at - ${by} where status = 'waiting' and fires_at is not null`;
    await tx`update signalbox.signals set buffer_expires_at = buffer_expires_at - ${by} where outcome = 'buffered' and buffer_expires_at is not null`;
    await tx`update signalbox.webhook_receipts set expires_at = expires_at - ${by}`;
    // A pending reminder's created_at is when it falls due (it is the event's occurred_at).
    await tx`update signalbox.notifications set created_at = created_at - ${by} where status = 'pending' and created_at > now()`;
    const [moved] = await tx<{ n: number }[]>`
      with moved as (
        update graphile_worker._private_jobs j set run_at = j.run_at - ${by}
        from graphile_worker._private_tasks t
        where t.id = j.task_id and j.locked_at is null and t.identifier not in ('sweep', 'purge_old_records')
        returning 1)
      select count(*)::int as n from moved`;
    // Delivered at commit, like add_job's own notification: idle workers look for jobs at once.
    if (moved!.n > 0) await tx`select pg_notify('jobs:insert', ${JSON.stringify({ count: moved!.n })})`;
  }));
}

/**
 * Runs every job that is due now, and every job those enqueue that is due now, then returns:
 * graphile-worker's runOnce on a worker the test controls, for an app started with
 * `{ worker: false }`. Jobs due later (a retry's backoff, a deadline not reached) stay pending:
 * `advanceClock` brings them due. The sweep and the purge do not run here (see advanceClock).
 */
export async function runDueJobs(app: TestApp): Promise<void> {
  if (app.worker) throw new Error("runDueJobs is for an app started with { worker: false }: its own worker would race it");
  const { sweep: _sweep, purge_old_records: _purge, ...tasks } = taskList({ ...app.deps, workerStaleS: app.config.SIGNALBOX_WORKER_STALE_S });
  await runOnce({ connectionString: app.databaseUrl, taskList: tasks as TaskList, noHandleSignals: true, concurrency: 1, logger: quiet });
}

const quiet = new Logger(() => () => {});

/**
 * Runs `fn` with this process's Date moved on by `seconds` (frozen there), then puts it back.
 * The checks that signalbox makes on the process clock, not the database's (an approval link's
 * `exp`, a signature's timestamp tolerance), see that much time passed; the app under test runs
 * in this process, so a link or a signature goes stale without the test sleeping. Timers are
 * not faked: I/O and waits run as usual.
 */
export async function withProcessClockAhead<T>(seconds: number, fn: () => Promise<T>): Promise<T> {
  vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + seconds * 1000 });
  try {
    return await fn();
  } finally {
    vi.useRealTimers();
  }
}
