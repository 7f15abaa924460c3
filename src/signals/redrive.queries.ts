import { and, asc, count, eq, isNotNull, isNull, or, sql, type SQL } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import { signals } from "../db/schema.ts";
import { outcomeIs, shownOutcome } from "./signals.queries.ts";

/** A signal record as redrive needs it; `outcome` is the one it shows (`expired` from its TTL on). */
export interface RedriveSource {
  id: string;
  runId: string;
  signal: string;
  outcome: string;
  payload: string | null;
  payloadBytes: number | null;
  idempotencyKey: string | null;
  receivedAt: Date;
}

const sourceColumns = {
  id: signals.id,
  runId: signals.runId,
  signal: signals.signal,
  outcome: shownOutcome,
  payload: signals.payload,
  payloadBytes: signals.payloadBytes,
  idempotencyKey: signals.idempotencyKey,
  receivedAt: signals.receivedAt,
};

/**
 * Reads a signal record and holds its row lock to the end of the transaction: two redrives of
 * one signal queue here, and the second reads the first's outcome after it committed.
 */
export async function lockRedriveSource(tx: Queryable, id: string): Promise<RedriveSource | undefined> {
  const [row] = await tx.select(sourceColumns).from(signals).where(eq(signals.id, id)).for("update");
  return row;
}

/**
 * The record that redrove `id`, if any. A statement of its own, run after the row lock was
 * taken: under READ COMMITTED it sees a redrive that committed while this one waited.
 */
export async function findRedriveOf(q: Queryable, id: string): Promise<string | undefined> {
  const [row] = await q.select({ id: signals.id }).from(signals).where(eq(signals.redrivenFrom, id));
  return row?.id;
}

/** Marks `newId` as the redrive of `fromId`; the unique index signals_redriven_from refuses a second. */
export async function markRedriven(q: Queryable, newId: string, fromId: string): Promise<void> {
  await q.update(signals).set({ redrivenFrom: fromId }).where(eq(signals.id, newId));
}

export interface RedriveMatch {
  /** Shown outcomes to take (rejected_not_waiting, expired, ...). */
  outcomes: readonly string[];
  signal?: string;
  runId?: string;
  /** Received strictly before this instant (RFC 3339, compared at Postgres's microseconds, not a JS Date's milliseconds). */
  before?: string;
  /** And before this one: the database's clock when the walk began (databaseNow). */
  until: string;
}

/**
 * An answer made for one wait (an approval link's, an operator's in the console): their keys
 * name the link or the wait. Never sent again: it would answer whichever wait of that name the
 * run has now, not the one it was made for.
 */
export const forOneWait = (key: string | null): boolean => key !== null && (key.startsWith("link:") || key.startsWith("console:"));
/** Why a sender's key (Idempotency-Key, a signed webhook-id) may not be one of those. */
export const RESERVED_KEY = "must not start with link: or console: (the keys of approval links' and the console's answers)";
const notForOneWait = sql`not coalesce(${signals.idempotencyKey} like 'link:%' or ${signals.idempotencyKey} like 'console:%', false)`;

function matching(f: RedriveMatch): SQL[] {
  const conditions: SQL[] = [or(...f.outcomes.map(outcomeIs))!, sql`${signals.receivedAt} < ${f.until}::timestamptz`, notForOneWait];
  if (f.before !== undefined) conditions.push(sql`${signals.receivedAt} < ${f.before}::timestamptz`);
  if (f.signal !== undefined) conditions.push(eq(signals.signal, f.signal));
  if (f.runId !== undefined) conditions.push(eq(signals.runId, f.runId));
  // Not redriven yet (the probe reads the unique index on redriven_from). The outer id spelled
  // out: drizzle leaves it unqualified in a one-table select, and here `id` would be r's own.
  conditions.push(sql`not exists (select 1 from signalbox.signals r where r.redriven_from = "signals"."id")`);
  return conditions;
}

/** Where a walk through the matches stands: the last record taken. */
export interface RedrivePosition {
  id: string;
  receivedAt: string;
}

/** The next page of records to redrive: matching, not redriven, with their payload kept; oldest first. */
export async function listRedriveCandidates(
  q: Queryable,
  f: RedriveMatch,
  after: RedrivePosition | undefined,
  limit: number,
): Promise<RedrivePosition[]> {
  const conditions = [...matching(f), isNotNull(signals.payload)];
  if (after) conditions.push(sql`(${signals.receivedAt}, ${signals.id}) > (${after.receivedAt}::timestamptz, ${after.id}::text)`);
  return q
    // received_at as text: a JS Date would drop its microseconds, and the page after would
    // include the record just taken.
    .select({ id: signals.id, receivedAt: sql<string>`${signals.receivedAt}::text` })
    .from(signals)
    .where(and(...conditions))
    .orderBy(asc(signals.receivedAt), asc(signals.id))
    .limit(limit);
}

/** How many matching records cannot be redriven because their payload was not kept. */
export async function countPayloadNotKept(q: Queryable, f: RedriveMatch): Promise<number> {
  const [row] = await q
    .select({ n: count() })
    .from(signals)
    .where(and(...matching(f), isNull(signals.payload)));
  return Number(row?.n ?? 0);
}

/** The database's clock: the instant a bulk redrive bounds itself by (its own new records come after it). */
export async function databaseNow(q: Queryable): Promise<string> {
  const [row] = await q.execute<{ now: string }>(sql`select now()::text as now`);
  return row!.now;
}
