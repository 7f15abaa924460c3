import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import { addJob } from "./enqueue.ts";

/** Records that this process's job worker pool is alive. */
export async function heartbeat(q: Queryable, poolId: string): Promise<void> {
  await q.execute(sql`
    insert into signalbox.worker_pools (pool_id, seen_at) values (${poolId}::text, now())
    on conflict (pool_id) do update set seen_at = now()`);
}

export async function forgetPool(q: Queryable, poolId: string): Promise<void> {
  await q.execute(sql`delete from signalbox.worker_pools where pool_id = ${poolId}::text`);
}

/**
 * Jobs locked by a process that died (SIGKILL, power loss) would stay locked for 4 hours;
 * release the jobs of every pool that has not been seen for `staleS` seconds so another
 * process runs them now. Also those of a pool never seen, holding jobs it locked over
 * `staleS` ago: a pool fetches jobs before its first heartbeat row is written, and a process
 * killed in between (or whose first heartbeat failed) leaves no row to go stale. A live pool
 * writes its row within a third of `staleS`. Returns the pools released.
 */
export async function releaseDeadPools(q: Queryable, staleS: number): Promise<string[]> {
  const rows = await q.execute<{ pool_id: string }>(sql`
    with dead as (
      delete from signalbox.worker_pools where seen_at < now() - ${staleS}::double precision * interval '1 second'
      returning pool_id
    ), unseen as (
      select distinct j.locked_by as pool_id from graphile_worker._private_jobs j
      where j.locked_at < now() - ${staleS}::double precision * interval '1 second'
        and not exists (select 1 from signalbox.worker_pools p where p.pool_id = j.locked_by)
    ), released as (select pool_id from dead union select pool_id from unseen)
    select pool_id from released, lateral (select graphile_worker.force_unlock_workers(array[released.pool_id])) as unlocked`);
  return rows.map((r) => r.pool_id);
}

/**
 * Releases every locked job, whoever locked it. Only for a process that owns its database (the
 * embedded Postgres, held by one process through the data dir lock), before its worker starts:
 * then no live worker can hold a job, and those of the process that died run again at once
 * instead of after SIGNALBOX_WORKER_STALE_S. Returns the pools released.
 */
export async function releaseEveryPool(q: Queryable): Promise<string[]> {
  const rows = await q.execute<{ locked_by: string }>(sql`
    with holders as (
      select locked_by from graphile_worker.jobs where locked_by is not null
      union select pool_id from signalbox.worker_pools
    ), forgotten as (
      delete from signalbox.worker_pools
    )
    select locked_by from holders, lateral (select graphile_worker.force_unlock_workers(array[holders.locked_by])) as unlocked`);
  return rows.map((r) => r.locked_by);
}

/**
 * Makes due now the callback batch jobs that stood in for callbacks a process had in hand: those
 * handed off to it by intake (db/functions/enqueue_callbacks.sql), and those queued at their
 * endpoint when its job let go of them (src/delivery/delivery-engine.ts). Each was due later
 * only in case that process died. Like releaseEveryPool, only for a process that owns its
 * database, before its worker starts: the process before it died. The other keyless batches
 * come due now too (those turned away by a busy or backed-off endpoint, or waiting out
 * graphile-worker's backoff after a failed run): the endpoint gate that held them back died with
 * that process. Returns how many.
 */
export async function callbackBatchesDueNow(q: Queryable): Promise<number> {
  const rows = await q.execute<{ n: number }>(sql`
    with due as (
      update graphile_worker._private_jobs j set run_at = now()
      from graphile_worker._private_tasks t
      where t.id = j.task_id and t.identifier = 'deliver_callback' and j.key is null and j.locked_at is null and j.run_at > now()
      returning 1)
    select count(*)::int as n from due`);
  return rows[0]?.n ?? 0;
}

/** The sweep runs on a schedule of its own: one pending sweep job for all processes (one key). */
export async function scheduleSweep(q: Queryable, inS: number, keepEarlier: boolean): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await addJob(q, "sweep", {}, {
        runAt: sql`now() + ${inS}::double precision * interval '1 second'`,
        jobKey: "sweep",
        jobKeyMode: keepEarlier ? "preserve_run_at" : "replace",
      });
      return;
    } catch (err) {
      // graphile/worker#580: a worker locked the pending sweep job between add_job's two
      // statements, so it returned no row. Again: add_job now moves the key off the locked job.
      if (attempt >= 5 || (err as { code?: string }).code !== "40001") throw err;
    }
  }
}

/**
 * Releases the jobs a worker pool of this process held when it stopped (a runner restarted after
 * the database went away): they run again now, not when the pool would be seen as dead.
 */
export async function releasePool(q: Queryable, poolId: string): Promise<void> {
  await q.execute(sql`
    with gone as (delete from signalbox.worker_pools where pool_id = ${poolId}::text)
    select graphile_worker.force_unlock_workers(array[${poolId}::text])`);
}
