import { sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { ConflictError } from "../core/errors.ts";
import { resolveWaits } from "../waits/resolve-waits.ts";
import { getRunResource, type RunResource } from "./get-run.ts";
import { lockRunTree, recordRunEvents, type TreeRun } from "./runs.queries.ts";

export interface ControlInput {
  runId: string;
  reason?: string;
  by?: string;
}

/**
 * Refuses a control the named run can no longer take: it was continued (its work goes on in
 * `continued_as`, as a checkpoint's 409 says; a 200 would change nothing), or, for pause and
 * resume, it was cancelled.
 */
function refuseFinal(tree: TreeRun[], runId: string, cancelledToo: boolean) {
  const run = tree.find((r) => r.run_id === runId);
  if (run?.status === "continued") throw new ConflictError(`run '${runId}' was continued as '${run.continued_as}'`, { continued_as: run.continued_as });
  if (cancelledToo && run?.status === "cancelled") throw new ConflictError(`run '${runId}' is cancelled`);
}

const ids = (runIds: string[]) => sql`run_id in (select json_array_elements_text(${JSON.stringify(runIds)}::json))`;

/**
 * Pauses a run and every descendant, in one transaction. It takes effect at checkpoints; the
 * first checkpoint that finds a run paused records `run.paused`. Pausing again changes nothing.
 */
export async function pauseRun(deps: Pick<Deps, "db">, input: ControlInput): Promise<RunResource> {
  return withTransaction(deps.db, async (tx) => {
    const tree = await lockRunTree(tx, input.runId);
    refuseFinal(tree, input.runId, true);
    const toPause = tree.filter((r) => r.status === "active" && !r.is_paused).map((r) => r.run_id);
    if (toPause.length > 0) {
      await tx.execute(sql`
        update signalbox.runs set is_paused = true, paused_at = now(), pause_reason = ${input.reason ?? null}::text,
          paused_by = ${input.by ?? null}::text, pause_observed = false
        where ${ids(toPause)}`);
      await recordRunEvents(tx, toPause, "run.pausing", { reason: input.reason ?? null, by: input.by ?? null, requested_on: input.runId });
    }
    return getRunResource(tx, input.runId);
  });
}

/** Resumes a run and every descendant: held checkpoints answer `proceed: true` at once. */
export async function resumeRun(deps: Pick<Deps, "db">, input: ControlInput): Promise<RunResource> {
  return withTransaction(deps.db, async (tx) => {
    const tree = await lockRunTree(tx, input.runId);
    refuseFinal(tree, input.runId, true);
    const toResume = tree.filter((r) => r.status === "active" && r.is_paused).map((r) => r.run_id);
    if (toResume.length > 0) {
      await tx.execute(sql`
        update signalbox.runs set is_paused = false, paused_at = null, pause_reason = null, paused_by = null, pause_observed = false
        where ${ids(toResume)}`);
      await recordRunEvents(tx, toResume, "run.resumed", { by: input.by ?? null, requested_on: input.runId });
    }
    return getRunResource(tx, input.runId);
  });
}

/**
 * Cancels a run and every descendant: each open wait becomes `cancelled` (callbacks
 * `signal.cancelled`), later signals are `rejected_not_active`, checkpoints answer 409.
 * Cancelling again changes nothing; a continued run is a 409 (cancel the run it continued as).
 */
export async function cancelRun(deps: Pick<Deps, "db">, input: ControlInput): Promise<RunResource> {
  return withTransaction(deps.db, async (tx) => {
    const tree = await lockRunTree(tx, input.runId);
    refuseFinal(tree, input.runId, false);
    const toCancel = tree.filter((r) => r.status === "active").map((r) => r.run_id);
    if (toCancel.length > 0) {
      const data = { reason: input.reason ?? null, by: input.by ?? null, requested_on: input.runId };
      await recordRunEvents(tx, toCancel, "run.cancelling", data);
      await tx.execute(sql`
        update signalbox.runs set status = 'cancelled', cancel_reason = ${input.reason ?? null}::text,
          cancelled_by = ${input.by ?? null}::text, cancelled_at = now(), is_paused = false
        where ${ids(toCancel)}`);
      await resolveWaits(tx, { where: ids(toCancel) }, { status: "cancelled", data: { reason: input.reason ?? null, by: input.by ?? null } });
      await recordRunEvents(tx, toCancel, "run.cancelled", data);
    }
    return getRunResource(tx, input.runId);
  });
}
