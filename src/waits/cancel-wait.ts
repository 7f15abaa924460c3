import { sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { ConflictError, NotFoundError } from "../core/errors.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { lockRun } from "../runs/run-lock.ts";
import { resolveWaits } from "./resolve-waits.ts";
import { toWaitResource, type WaitResource } from "./wait-view.ts";
import { findWait } from "./waits.queries.ts";

/** Cancels a waiting wait (callback `signal.cancelled`); a wait already resolved is a 409. */
export async function cancelWait(deps: Pick<Deps, "db">, id: string): Promise<WaitResource> {
  return withTransaction(deps.db, async (tx) => {
    const before = await findWait(tx, id);
    if (!before) throw new NotFoundError(`no wait with id '${id}'`);
    await lockRun(tx, before.runId);
    const [cancelled] = await resolveWaits(tx, { ids: [id] }, { status: "cancelled" });
    const after = (await findWait(tx, id))!;
    if (!cancelled) throw new ConflictError(`wait '${id}' is already ${after.status}`, { wait_status: after.status });
    return toWaitResource(after);
  });
}

/**
 * Sends the callback again, now: after it failed or was delivered, or while a retry is pending
 * (the pending job runs now instead of after its backoff). Starts a new round of attempts
 * (SIGNALBOX_DELIVERY_MAX_ATTEMPTS and the backoff count from here); the attempts so far stay
 * recorded and the numbers go on. The job is enqueued in the transaction that starts the round.
 */
export async function redeliverWait(deps: Pick<Deps, "db">, id: string): Promise<WaitResource> {
  return withTransaction(deps.db, async (tx) => {
    // Locked: an attempt recording now waits for this round to begin (or this for it), never half of each.
    const [locked] = await tx.execute<{ id: string }>(sql`select id from signalbox.waits where id = ${id}::text for update`);
    const wait = locked && (await findWait(tx, id));
    if (!wait) throw new NotFoundError(`no wait with id '${id}'`);
    if (!wait.callbackUrl) throw new ConflictError(`wait '${id}' has no callback_url`);
    if (wait.status === "waiting") throw new ConflictError(`wait '${id}' is still waiting: there is nothing to deliver yet`);
    await tx.execute(sql`
      update signalbox.waits set delivery_status = 'pending', delivery_round_start = delivery_attempts, delivery_round = delivery_round + 1
      where id = ${id}::text`);
    // Replaces a pending retry's run time with now (same key). An attempt already in flight
    // keeps running: both may send, and the compare-and-set records that attempt number once.
    await addJob(tx, "deliver_callback", { id }, { jobKey: jobKeys.deliver(id) });
    return toWaitResource((await findWait(tx, id))!);
  });
}
