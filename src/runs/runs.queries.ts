import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import { lockRun } from "./run-lock.ts";

export type TreeRun = { run_id: string; status: "active" | "cancelled" | "continued"; is_paused: boolean; continued_as: string | null };

/**
 * Locks a run and every registered descendant (creating the root on first sight), in run_id
 * order so two overlapping trees lock in the same order. Returns them, root included.
 */
export async function lockRunTree(tx: Queryable, runId: string): Promise<TreeRun[]> {
  await lockRun(tx, runId);
  return tx.execute<TreeRun>(sql`
    with recursive tree as (
      select run_id from signalbox.runs where run_id = ${runId}::text
      union
      select r.run_id from signalbox.runs r join tree t on r.parent_run_id = t.run_id
    )
    select run_id, status, is_paused, continued_as from signalbox.runs
    where run_id in (select run_id from tree)
    order by run_id
    for update`);
}

/** True when `candidate` is `runId` or one of its ancestors (registering it as a child would close a cycle). */
export async function isSelfOrAncestor(tx: Queryable, runId: string, candidate: string): Promise<boolean> {
  const rows = await tx.execute<{ found: boolean }>(sql`
    with recursive up as (
      select run_id, parent_run_id, 1 as depth from signalbox.runs where run_id = ${runId}::text
      union all
      select r.run_id, r.parent_run_id, up.depth + 1 from signalbox.runs r join up on r.run_id = up.parent_run_id
      where up.depth < 1000
    )
    select exists (select 1 from up where run_id = ${candidate}::text) as found`);
  return Boolean(rows[0]?.found);
}

/** Records one history event per run, in one statement. */
export async function recordRunEvents(tx: Queryable, runIds: string[], type: string, data: Record<string, unknown>): Promise<void> {
  if (runIds.length === 0) return;
  await tx.execute(sql`
    insert into signalbox.events (run_id, type, data)
    select id, ${type}::text, ${JSON.stringify(data)}::jsonb from json_array_elements_text(${JSON.stringify(runIds)}::json) as ids(id)`);
}
