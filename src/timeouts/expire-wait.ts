import { sql } from "drizzle-orm";
import { withTransaction, type Deps } from "../core/context.ts";
import { debugPoint } from "../core/debug-point.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { lockRun } from "../runs/runs.queries.ts";
import { resolveWaits } from "../waits/resolve-waits.ts";
import { findWait } from "../waits/waits.queries.ts";

/**
 * The timeout job: times the wait out if it is still waiting and its deadline has passed
 * (compare-and-set; a signal that won the race makes this a no-op). If the deadline moved
 * into the future, the timer is set again rather than firing early.
 */
export async function expireWait(deps: Pick<Deps, "db" | "metrics">, waitId: string): Promise<"timed_out" | "not_waiting" | "rescheduled"> {
  return withTransaction(deps.db, async (tx) => {
    const wait = await findWait(tx, waitId);
    if (!wait || wait.status !== "waiting") return "not_waiting";
    await debugPoint("expire-wait:read", waitId); // tests: a signal may commit here, after our read
    await lockRun(tx, wait.runId);
    const [expired] = await resolveWaits(tx, sql`id = ${waitId}::text and timeout_at <= now()`, {
      status: "timed_out",
      event: "signal.timeout",
    });
    if (expired) {
      deps.metrics?.timeoutsFired.inc();
      if (expired.timeoutAt && expired.resolvedAt) deps.metrics?.timeoutLag.observe((expired.resolvedAt.getTime() - expired.timeoutAt.getTime()) / 1000);
      await debugPoint("expire-wait:resolved", waitId); // tests: still holding the run lock, not yet committed
      return "timed_out";
    }
    const still = await findWait(tx, waitId);
    if (still?.status === "waiting" && still.timeoutAt) {
      await addJob(tx, "expire_wait", { id: waitId }, { runAt: sql`${still.timeoutAt.toISOString()}::timestamptz`, jobKey: jobKeys.expire(waitId) });
      return "rescheduled";
    }
    return "not_waiting";
  });
}
