import { sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { debugPoint } from "../core/debug-point.ts";
import type { Db, Tx } from "../db/client.ts";
import { armDeadlineAlarm } from "../jobs/deadline-alarm.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { lockRun } from "../runs/run-lock.ts";
import { resolveWaits, type ResolvedWait } from "../waits/resolve-waits.ts";
import { findWait } from "../waits/waits.queries.ts";
import { Limit } from "../core/limit.ts";
import { keptFor } from "../core/kept-for.ts";

/**
 * Expiry transactions in flight at once on one database pool (a process's). Every timer slot (8)
 * may run a timeout job when thousands fall due together, and each would hold one of the pool's
 * connections (8 by default) for a batch of 1,000, or waiting for a run a batch has locked: the
 * delivery engine's reads and the API then waited for all of them to commit (measured: no
 * callback before 0.5 s). Two at a time take the same batches one after another, commit the
 * first within about 0.15 s, and leave the pool to the rest. Per pool, not per module: two
 * services in one process (as tests run them) each have their own, as two processes do.
 */
const EXPIRY_LANES = 2;
const lanes = new WeakMap<Db, Limit>();

const expiryLanes = (db: Db): Limit => keptFor(lanes, db, () => new Limit(EXPIRY_LANES));

/** Waits timed out per transaction when many come due at once. */
export const EXPIRY_BATCH = 1000;

/**
 * The timeout job of one wait. It times out every wait that is due, in batches, not just its
 * own: 10,000 waits with one deadline fire in a few transactions instead of 10,000 jobs, and
 * the timeout jobs of the waits it took are removed. Concurrent jobs take disjoint batches:
 * each locks the runs it takes with SKIP LOCKED (runs before waits, as every writer does).
 * Each wait still leaves `waiting` only through the compare-and-set, so a signal that won the
 * race is never undone.
 */
export async function expireWait(deps: Pick<Deps, "db" | "metrics">, waitId: string): Promise<"timed_out" | "not_waiting" | "rescheduled"> {
  await debugPoint("expire-wait:read", waitId); // tests: the job has started; a signal may commit here
  const tookOwn = await expireDue(deps, waitId);
  // Usually a batch took this job's own wait; only otherwise look at it alone.
  return tookOwn ? "timed_out" : expiryLanes(deps.db).run(() => withTransaction(deps.db, (tx) => expireOwn(deps, tx, waitId)));
}

/**
 * The deadline alarm's job (db/functions/deadline_alarm.sql): times out every wait that is due,
 * then arms the alarm again for the next deadline.
 */
export async function runDeadlineAlarm(deps: Pick<Deps, "db" | "metrics">): Promise<void> {
  await expireDue(deps);
  await armDeadlineAlarm(deps.db);
}

/** Times out every wait that is due, in batches (up to 100); whether one of them was `ownId`. */
async function expireDue(deps: Pick<Deps, "db" | "metrics">, ownId?: string): Promise<boolean> {
  let tookOwn = false;
  for (let batch = 0; batch < 100; batch++) {
    const step = await expiryLanes(deps.db).run(() => withTransaction(deps.db, (tx) => expireDueBatch(deps, tx, ownId)));
    tookOwn ||= step.tookOwn;
    if (!step.more) break;
  }
  return tookOwn;
}

/**
 * The deadline alarm leaves a wait with a timeout job of its own to that job (which takes every
 * due wait, these included) while the job runs or is about to, so each wait's timeout runs one
 * way or the other, as it was opened. Not when the job failed and waits out graphile-worker's
 * backoff (seconds, then hours) or gave up: then the alarm times the wait out, and
 * resolve_waits removes the job.
 */
const ownJobWillRun = sql`and not exists (
  select 1 from graphile_worker._private_jobs j
  where j.key = signalbox.job_key('expire_wait', w.id) and (j.locked_at is not null or (j.attempts < j.max_attempts and j.run_at <= now())))`;

/**
 * One batch of due waits whose runs no other transaction holds (with no `ownId`, the alarm's:
 * those relying on it); `more` when there may be more.
 */
async function expireDueBatch(deps: Pick<Deps, "metrics">, tx: Tx, ownId?: string): Promise<{ more: boolean; tookOwn: boolean }> {
  const alarmOnly = ownId === undefined;
  const due = await tx.execute<{ id: string }>(sql`
    select w.id from signalbox.waits w join signalbox.runs r on r.run_id = w.run_id
    where w.status = 'waiting' and w.timeout_at <= now() ${alarmOnly ? ownJobWillRun : sql``}
    order by w.timeout_at limit ${EXPIRY_BATCH}
    for update of r skip locked`);
  if (due.length === 0) return { more: false, tookOwn: false };
  // Their timeout jobs have nothing left to do: resolve_waits drops them rather than run them.
  const expired = await resolveWaits(tx, { ids: due.map((w) => w.id) }, { status: "timed_out", dueOnly: true });
  recordLag(deps, expired);
  const tookOwn = ownId !== undefined && expired.some((w) => w.id === ownId);
  if (tookOwn) await debugPoint("expire-wait:resolved", ownId); // tests: resolved, not yet committed
  return { more: due.length === EXPIRY_BATCH, tookOwn };
}

/** This job's own wait, if the batches did not take it (its run was busy, or it is not due). */
async function expireOwn(deps: Pick<Deps, "metrics">, tx: Tx, waitId: string): Promise<"timed_out" | "not_waiting" | "rescheduled"> {
  const wait = await findWait(tx, waitId);
  if (!wait || wait.status !== "waiting") return wait?.status === "timed_out" ? "timed_out" : "not_waiting";
  await lockRun(tx, wait.runId);
  const expired = await resolveWaits(tx, { ids: [waitId] }, { status: "timed_out", dueOnly: true });
  recordLag(deps, expired);
  if (expired.length === 0) return rescheduleIfEarly(tx, waitId);
  await debugPoint("expire-wait:resolved", waitId); // tests: still holding the run lock, not yet committed
  return "timed_out";
}

/** Still waiting with a deadline in the future (moved, or clock skew): set the timer again. */
async function rescheduleIfEarly(tx: Tx, waitId: string): Promise<"rescheduled" | "not_waiting"> {
  const still = await findWait(tx, waitId);
  if (still?.status !== "waiting" || !still.timeoutAt) return "not_waiting";
  await addJob(tx, "expire_wait", { id: waitId }, { runAt: sql`${still.timeoutAt.toISOString()}::timestamptz`, jobKey: jobKeys.expire(waitId) });
  return "rescheduled";
}

function recordLag(deps: Pick<Deps, "metrics">, expired: ResolvedWait[]) {
  for (const w of expired) {
    deps.metrics?.timeoutsFired.inc();
    if (w.timeoutAt) deps.metrics?.timeoutLag.observe((w.resolvedAt.getTime() - w.timeoutAt.getTime()) / 1000);
  }
}
