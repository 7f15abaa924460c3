import { and, asc, eq, getTableColumns, gt, lt, sql, type SQL } from "drizzle-orm";
import { unprepared, type Db, type Queryable } from "../db/client.ts";
import { events, signals, waits } from "../db/schema.ts";
import type { WaitRow } from "./wait-view.ts";

/** Waits with the signal that resolved them, in one query (never one query per wait). */
function selectWaits(q: Queryable) {
  return q
    .select({
      ...getTableColumns(waits),
      result: { sequence: signals.sequence, payload: signals.payload, receivedAt: signals.receivedAt },
    })
    .from(waits)
    .leftJoin(signals, eq(signals.id, waits.signalId));
}

function normalise(rows: Array<Omit<WaitRow, "result"> & { result: WaitRow["result"] | { sequence: null; payload: null; receivedAt: null } }>): WaitRow[] {
  return rows.map((r) => ({ ...r, result: r.result && r.result.receivedAt ? (r.result as WaitRow["result"]) : null }));
}

export async function findWait(q: Queryable, id: string): Promise<WaitRow | undefined> {
  return normalise(await selectWaits(q).where(eq(waits.id, id)))[0];
}

export async function findWaitByKey(q: Queryable, runId: string, key: string): Promise<WaitRow | undefined> {
  return normalise(await selectWaits(q).where(and(eq(waits.runId, runId), eq(waits.key, key))))[0];
}


export interface WaitFilter {
  runId?: string;
  parentWaitId?: string;
  signal?: string;
  status?: string;
  /** The callback's delivery status (none, pending, delivered, failed). */
  delivery?: string;
  metadata?: Record<string, string>;
  deadlineBefore?: Date;
  /** Only waits with a deadline after this instant (the console's "times out after"). */
  deadlineAfter?: Date;
  createdBefore?: Date;
  kind?: string;
  after?: { createdAt: Date; id: string };
}

/**
 * Oldest first, keyset-paginated on (created_at, id); fetches limit + 1 to know if there is more.
 * Planned for its values each time (unprepared): whether to walk an index in created_at order or
 * to gather the few matches and sort them depends on how many waits the filter finds.
 */
export async function listWaits(db: Db, f: WaitFilter, limit: number): Promise<WaitRow[]> {
  const conditions: SQL[] = [];
  if (f.runId !== undefined) conditions.push(eq(waits.runId, f.runId));
  if (f.parentWaitId !== undefined) conditions.push(eq(waits.parentWaitId, f.parentWaitId));
  if (f.signal !== undefined) conditions.push(eq(waits.signal, f.signal));
  if (f.status !== undefined) conditions.push(eq(waits.status, f.status));
  // Not indexed (an index would cost every delivery's status update its HOT update): a filter
  // beside the others, or GET /deliveries, which has its own index, for failing deliveries.
  if (f.delivery !== undefined) conditions.push(eq(waits.deliveryStatus, f.delivery));
  if (f.metadata && Object.keys(f.metadata).length > 0) {
    // The second clause is implied by the first (the filter is not empty); it lets the planner use the partial GIN index.
    conditions.push(sql`${waits.metadata} @> ${JSON.stringify(f.metadata)}::jsonb and ${waits.metadata} <> '{}'::jsonb`);
  }
  if (f.deadlineBefore) conditions.push(lt(waits.timeoutAt, f.deadlineBefore));
  if (f.deadlineAfter) conditions.push(gt(waits.timeoutAt, f.deadlineAfter));
  if (f.kind !== undefined) conditions.push(eq(waits.kind, f.kind));
  if (f.createdBefore) conditions.push(lt(waits.createdAt, f.createdBefore));
  if (f.after) {
    conditions.push(sql`(${waits.createdAt}, ${waits.id}) > (${f.after.createdAt.toISOString()}::timestamptz, ${f.after.id}::text)`);
  }
  const rows = await selectWaits(unprepared(db))
    .where(and(...conditions))
    .orderBy(asc(waits.createdAt), asc(waits.id))
    .limit(limit + 1);
  return normalise(rows);
}

type WaitWithEvent = { wait: WaitRow; event: { id: number; type: string; occurredAt: Date } };

/** A resolved wait with its resolution event (what a callback carries), in one query. */
export async function findWaitWithEvent(db: Db, id: string): Promise<WaitWithEvent | undefined> {
  return (await findWaitsWithEvents(db, [id]))[0];
}

function waitsWithEventsQuery(db: Db) {
  return db
    .select({
      ...getTableColumns(waits),
      result: { sequence: signals.sequence, payload: signals.payload, receivedAt: signals.receivedAt },
      event: { id: events.id, type: events.type, occurredAt: events.occurredAt },
    })
    .from(waits)
    .leftJoin(signals, eq(signals.id, waits.signalId))
    .innerJoin(events, eq(events.id, waits.resolutionEventId))
    .where(sql`${waits.id} = any(array(select json_array_elements_text(${sql.placeholder("ids")}::json)))`)
    .prepare("find_waits_with_events");
}
/** Built once per database handle: building a select of every column costs more than running it. */
const waitsWithEvents = new WeakMap<Db, ReturnType<typeof waitsWithEventsQuery>>();

/**
 * Several waits with their resolution events, in one query (the delivery engine reads a batch
 * of callbacks at once): one statement text whatever the count (ids go as one JSON parameter),
 * built once. Waits with no resolution event yet are left out.
 */
export async function findWaitsWithEvents(db: Db, ids: string[]): Promise<WaitWithEvent[]> {
  if (ids.length === 0) return [];
  let query = waitsWithEvents.get(db);
  if (!query) waitsWithEvents.set(db, (query = waitsWithEventsQuery(db)));
  const rows = await query.execute({ ids: JSON.stringify(ids) });
  const found = normalise(rows.map(({ event: _event, ...wait }) => wait));
  return found.map((wait, i) => ({ wait, event: rows[i]!.event }));
}
