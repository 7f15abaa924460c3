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

/** Queues the callback again after it failed (or to send it once more after delivery). */
export async function redeliverWait(deps: Pick<Deps, "db">, id: string): Promise<WaitResource> {
  return withTransaction(deps.db, async (tx) => {
    const wait = await findWait(tx, id);
    if (!wait) throw new NotFoundError(`no wait with id '${id}'`);
    if (!wait.callbackUrl) throw new ConflictError(`wait '${id}' has no callback_url`);
    if (wait.status === "waiting") throw new ConflictError(`wait '${id}' is still waiting: there is nothing to deliver yet`);
    if (wait.deliveryStatus === "pending") throw new ConflictError(`wait '${id}' already has a delivery pending`);
    await tx.execute(sql`
      update signalbox.waits set delivery_status = 'pending', delivery_attempts = 0, delivery_last_error = null
      where id = ${id}::text`);
    await addJob(tx, "deliver_callback", { id }, { jobKey: jobKeys.deliver(id) });
    return toWaitResource((await findWait(tx, id))!);
  });
}
