import { sql } from "drizzle-orm";
import { withTransaction, type Deps } from "../core/context.ts";
import { recordEvent } from "../events/events.queries.ts";
import { resolveWaits } from "../waits/resolve-waits.ts";
import { getRunResource, type RunResource } from "./get-run.ts";
import { lockRun } from "./runs.queries.ts";

export interface CancelRunInput {
  runId: string;
  reason?: string;
  by?: string;
}

/**
 * Cancels a run: every open wait becomes `cancelled` (callbacks `signal.cancelled`), later
 * signals are `rejected_not_active`. Cancelling again changes nothing.
 */
export async function cancelRun(deps: Pick<Deps, "db">, input: CancelRunInput): Promise<RunResource> {
  return withTransaction(deps.db, async (tx) => {
    const run = await lockRun(tx, input.runId);
    if (run.status !== "cancelled") {
      await tx.execute(sql`
        update signalbox.runs set status = 'cancelled', cancel_reason = ${input.reason ?? null}::text,
          cancelled_by = ${input.by ?? null}::text, cancelled_at = now()
        where run_id = ${input.runId}::text`);
      await resolveWaits(tx, sql`run_id = ${input.runId}::text`, {
        status: "cancelled",
        event: "signal.cancelled",
        data: { reason: input.reason ?? null, by: input.by ?? null },
      });
      await recordEvent(tx, { runId: input.runId, type: "run.cancelled", data: { reason: input.reason ?? null, by: input.by ?? null } });
    }
    return getRunResource(tx, input.runId);
  });
}
