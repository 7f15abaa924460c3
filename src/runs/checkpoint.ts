import { eq, sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { ConflictError } from "../core/errors.ts";
import { runs } from "../db/schema.ts";
import type { ChangeFeed } from "../events/change-feed.ts";

export const MAX_CHECKPOINT_WAIT_S = 60;

/**
 * A workflow's safe point. Not paused: proceed at once. Paused: the first checkpoint to see it
 * records `run.paused`; then it holds until the run is resumed (proceed), cancelled or continued (409) or
 * `waitS` passes (proceed: false, ask again). Nothing is held in the database while it waits.
 */
export async function checkpoint(
  deps: Pick<Deps, "db"> & { changes: ChangeFeed },
  runId: string,
  name: string,
  waitS: number,
  signal: AbortSignal,
): Promise<{ proceed: boolean }> {
  const read = async () => {
    const [run] = await deps.db.select({ status: runs.status, isPaused: runs.isPaused, continuedAs: runs.continuedAs }).from(runs).where(eq(runs.runId, runId));
    return run ?? { status: "active", isPaused: false, continuedAs: null }; // a run never seen is not paused
  };
  let state = await read();
  if (state.status === "active" && state.isPaused) {
    await recordPausedAt(deps, runId, name);
    state = await deps.changes.hold(`run:${runId}`, Math.min(waitS, MAX_CHECKPOINT_WAIT_S) * 1000, signal, read, (r) => r.status !== "active" || !r.isPaused);
  }
  if (state.status === "cancelled") throw new ConflictError(`run '${runId}' is cancelled`, { proceed: false });
  // Its work goes on in the new run (continue-as-new): the old run's code must not.
  if (state.status === "continued") throw new ConflictError(`run '${runId}' was continued as '${state.continuedAs}'`, { proceed: false, continued_as: state.continuedAs });
  return { proceed: !state.isPaused };
}

/** `run.paused` once per pause: the compare-and-set on pause_observed lets exactly one checkpoint record it. */
async function recordPausedAt(deps: Pick<Deps, "db">, runId: string, name: string) {
  await withTransaction(deps.db, (tx) =>
    tx.execute(sql`
      with observed as (
        update signalbox.runs set pause_observed = true
        where run_id = ${runId}::text and is_paused and not pause_observed and status = 'active'
        returning run_id
      )
      insert into signalbox.events (run_id, type, data)
      select run_id, 'run.paused', json_build_object('checkpoint', ${name}::text)::jsonb from observed`),
  );
}
