import { sql } from "drizzle-orm";
import { withTransaction, type Deps } from "../core/context.ts";
import { debugPoint } from "../core/debug-point.ts";
import type { Tx } from "../db/client.ts";
import { addJob, jobKeys, removeJobs } from "../jobs/enqueue.ts";
import { lockRun, lockRuns } from "../runs/runs.queries.ts";
import { resolveWaits } from "../waits/resolve-waits.ts";
import type { WaitRowOnly } from "../waits/wait-view.ts";
import { findWait } from "../waits/waits.queries.ts";

/** Waits timed out per transaction when many come due at once. */
export const EXPIRY_BATCH = 500;
const BATCH_EXPIRER_LOCK = "signalbox:expire-due-waits";

/**
 * The timeout job of one wait. It times out every wait that is due, in batches, not just its
 * own: 10,000 waits with one deadline then fire in a few transactions instead of 10,000 jobs,
 * and the jobs of the waits it took are removed. One process at a time sweeps (an advisory
 * lock); a job that finds the sweep busy just handles its own wait. Each wait still leaves
 * `waiting` only through the compare-and-set, so a signal that won the race is never undone.
 */
export async function expireWait(deps: Pick<Deps, "db" | "metrics">, waitId: string): Promise<"timed_out" | "not_waiting" | "rescheduled"> {
  let own: "timed_out" | "not_waiting" | "rescheduled" = "not_waiting";
  for (let batch = 0; batch < 100; batch++) {
    const step = await withTransaction(deps.db, (tx) => expireStep(deps, tx, waitId));
    if (step.own) own = step.own;
    if (!step.more) break;
  }
  return own;
}

async function expireStep(deps: Pick<Deps, "metrics">, tx: Tx, waitId: string): Promise<{ own?: "timed_out" | "not_waiting" | "rescheduled"; more: boolean }> {
  const wait = await findWait(tx, waitId);
  const [{ sweeping } = { sweeping: false }] = await tx.execute<{ sweeping: boolean }>(sql`select pg_try_advisory_xact_lock(hashtext(${BATCH_EXPIRER_LOCK})) as sweeping`);
  const due = sweeping
    ? await tx.execute<{ id: string; run_id: string }>(sql`
        select id, run_id from signalbox.waits
        where status = 'waiting' and timeout_at <= now()
        order by timeout_at limit ${EXPIRY_BATCH}`)
    : [];
  const ids = new Set(due.map((w) => w.id));
  if (wait?.status === "waiting") ids.add(waitId);
  if (ids.size === 0) return { own: "not_waiting", more: false };

  await debugPoint("expire-wait:read", waitId); // tests: a signal may commit here, after our read
  // Runs before waits, in run_id order: the same lock order as every other writer.
  if (wait?.status === "waiting" && ids.size === 1) await lockRun(tx, wait.runId);
  else await lockRuns(tx, [...new Set([...due.map((w) => w.run_id), ...(wait ? [wait.runId] : [])])]);
  const expired = await resolveWaits(tx, sql`id in (select json_array_elements_text(${JSON.stringify([...ids])}::json)) and timeout_at <= now()`, {
    status: "timed_out",
    event: "signal.timeout",
  });
  // The other waits' timeout jobs have nothing left to do: drop them rather than run them.
  await removeJobs(tx, expired.filter((w) => w.id !== waitId).map((w) => jobKeys.expire(w.id)));
  recordLag(deps, expired);
  const mine = expired.find((w) => w.id === waitId);
  if (mine) await debugPoint("expire-wait:resolved", waitId); // tests: still holding the run lock, not yet committed
  const own = mine ? "timed_out" : await rescheduleIfEarly(tx, waitId);
  return { own, more: due.length === EXPIRY_BATCH };
}

/** Still waiting with a deadline in the future (moved, or clock skew): set the timer again. */
async function rescheduleIfEarly(tx: Tx, waitId: string): Promise<"rescheduled" | "not_waiting"> {
  const still = await findWait(tx, waitId);
  if (still?.status !== "waiting" || !still.timeoutAt) return "not_waiting";
  await addJob(tx, "expire_wait", { id: waitId }, { runAt: sql`${still.timeoutAt.toISOString()}::timestamptz`, jobKey: jobKeys.expire(waitId) });
  return "rescheduled";
}

function recordLag(deps: Pick<Deps, "metrics">, expired: WaitRowOnly[]) {
  for (const w of expired) {
    deps.metrics?.timeoutsFired.inc();
    if (w.timeoutAt && w.resolvedAt) deps.metrics?.timeoutLag.observe((w.resolvedAt.getTime() - w.timeoutAt.getTime()) / 1000);
  }
}
