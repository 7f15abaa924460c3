import { sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { lockRun } from "../runs/run-lock.ts";
import { receiveWait } from "../waits/resolve-waits.ts";
import { findWait } from "../waits/waits.queries.ts";

/**
 * The timer job: a timer wait still waiting whose time has come is received with
 * `{fired_at}`. Early (the job ran before fires_at, e.g. clock skew), it sets itself again.
 * A timer that came due while every process was down fires on the first poll after restart.
 */
export async function fireTimer(deps: Pick<Deps, "db">, waitId: string): Promise<"fired" | "not_waiting" | "rescheduled"> {
  return withTransaction(deps.db, async (tx) => {
    const before = await findWait(tx, waitId);
    if (!before || before.status !== "waiting" || before.kind !== "timer" || !before.firesAt) return "not_waiting";
    await lockRun(tx, before.runId);
    const [due] = await tx.execute<{ status: string; due: boolean; now: Date }>(sql`
      select status, fires_at <= now() as due, now() as now from signalbox.waits where id = ${waitId}::text`);
    if (due?.status !== "waiting") return "not_waiting";
    if (!due.due) {
      await addJob(tx, "fire_timer", { id: waitId }, { runAt: sql`${before.firesAt.toISOString()}::timestamptz`, jobKey: jobKeys.timer(waitId) });
      return "rescheduled";
    }
    await receiveWait(tx, waitId, { fired_at: new Date(due.now).toISOString() });
    return "fired";
  });
}
