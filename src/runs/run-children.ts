import { sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { ConflictError, NotFoundError } from "../core/errors.ts";
import { getRunResource, type RunResource } from "./get-run.ts";
import { lockRun } from "./run-lock.ts";
import { isSelfOrAncestor } from "./runs.queries.ts";

/** The advisory lock registrations of children take (the deadline alarm's is 5910). */
const RUN_CHILDREN_LOCK = 5911;

/**
 * Registers `childId` under `parentId`: pause, resume and cancel of the parent reach it. A child
 * has one parent; cycles are refused. A child of a paused parent starts paused; a cancelled
 * parent takes no children.
 */
export async function registerChild(deps: Pick<Deps, "db">, parentId: string, childId: string): Promise<RunResource> {
  return withTransaction(deps.db, async (tx) => {
    // One registration at a time: the cycle check reads the parent's ancestors unlocked, so two
    // registrations sharing no run (with B under A and D under C: C under B while A goes under D)
    // would each miss the link the other adds, and together close a cycle. Taken before any run
    // lock, and only here, so it orders registrations without joining any other writer's lock order.
    await tx.execute(sql`select pg_advisory_xact_lock(${RUN_CHILDREN_LOCK}::bigint)`);
    const [first, second] = [parentId, childId].sort();
    const locked = { [first!]: await lockRun(tx, first!), [second!]: await lockRun(tx, second!) };
    const parent = locked[parentId]!;
    if (parent.status === "cancelled") throw new ConflictError(`run '${parentId}' is cancelled`);
    if (await isSelfOrAncestor(tx, parentId, childId)) {
      throw new ConflictError(`run '${childId}' is '${parentId}' or one of its ancestors: registering it would make a cycle`);
    }
    const [current] = await tx.execute<{ parent_run_id: string | null }>(sql`select parent_run_id from signalbox.runs where run_id = ${childId}::text`);
    if (current?.parent_run_id && current.parent_run_id !== parentId) {
      throw new ConflictError(`run '${childId}' is already a child of '${current.parent_run_id}'`);
    }
    await tx.execute(sql`
      update signalbox.runs c set parent_run_id = p.run_id,
        is_paused = c.is_paused or (p.is_paused and c.status = 'active'),
        paused_at = case when not c.is_paused and p.is_paused and c.status = 'active' then now() else c.paused_at end,
        pause_reason = case when not c.is_paused and p.is_paused and c.status = 'active' then p.pause_reason else c.pause_reason end,
        paused_by = case when not c.is_paused and p.is_paused and c.status = 'active' then p.paused_by else c.paused_by end
      from signalbox.runs p
      where c.run_id = ${childId}::text and p.run_id = ${parentId}::text`);
    return getRunResource(tx, parentId);
  });
}

export async function unregisterChild(deps: Pick<Deps, "db">, parentId: string, childId: string): Promise<RunResource> {
  return withTransaction(deps.db, async (tx) => {
    const rows = await tx.execute(sql`
      update signalbox.runs set parent_run_id = null
      where run_id = ${childId}::text and parent_run_id = ${parentId}::text returning run_id`);
    if (rows.length === 0) throw new NotFoundError(`run '${childId}' is not a child of '${parentId}'`);
    return getRunResource(tx, parentId);
  });
}
