import { and, asc, eq, fillPlaceholders, getTableColumns, sql, type SQL } from "drizzle-orm";
import type postgres from "postgres";
import { unprepared, unpreparedClient, type Db, type Queryable } from "../db/client.ts";
import { signals, waits } from "../db/schema.ts";
import type { WaitRow, WaitRowOnly } from "./wait-view.ts";
import { keptFor } from "../core/kept-for.ts";

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
 * Open waits meeting a deadline filter that are at most this many are gathered by their deadlines
 * (waits_open_signal_deadline, waits_open_deadline) and sorted; when more meet it, the planner's
 * estimate is good enough to choose how to find them.
 */
const FEW_BY_DEADLINE = 500;

/**
 * Oldest first, keyset-paginated on (created_at, id); fetches limit + 1 to know if there is more.
 * Planned for its values each time (unprepared): whether to walk an index in created_at order or
 * to gather the few matches and sort them depends on how many waits the filter finds.
 *
 * Open waits filtered by deadline are counted rather than estimated: the planner's estimate of
 * `timeout_at < …` comes from statistics that count resolved waits too (their deadlines are kept),
 * so at a million open waits a deadline that none meets could look common, and the query walked
 * every open wait of a signal in created_at order to find nothing (0.85 s). Gathering at most
 * FEW_BY_DEADLINE + 1 of them by their deadlines tells which case it is, and is cheap either way
 * (at a million open waits: 6 index pages and no heap page to count, against 505 pages to read
 * them; the few are then read once).
 */
export async function listWaits(db: Db, f: WaitFilter, limit: number): Promise<WaitRow[]> {
  const queries = listQueriesFor(db, f);
  const values = { ...filterValues(f), limit: limit + 1 };
  if (queries.count) {
    const [{ n } = { n: 0 }] = await queries.count.execute(values);
    if (n === 0) return [];
    if (n <= FEW_BY_DEADLINE) return queries.few!.execute(values);
  }
  // No deadline filter, or many meet it: the planner's estimate is good enough to choose.
  return queries.page.execute(values);
}

/**
 * A query's text and parameters built once, run each time as an unnamed statement, so Postgres
 * plans it for the values it is given. drizzle's `prepare(name)` makes a named statement, which
 * Postgres may plan once for every value (a generic plan): at a million open waits, a metadata
 * filter's generic plan took 60 ms where the plan for its own values takes 3.
 */
function builtOnce<T>(query: { prepare(name: string): T }): T {
  const build = (query as unknown as { _prepare?: () => T })._prepare;
  if (typeof build !== "function") throw new Error("drizzle no longer builds a query without naming it (_prepare)");
  return build.call(query);
}

/**
 * The statements of one filter shape (which filters are given), built once with placeholders
 * for the values: building a drizzle select of every column took a fifth of a listing's CPU.
 * They run as unnamed statements all the same (planned for their values each time, above).
 */
function buildListQueries(db: Db, f: WaitFilter) {
  const q = unprepared(db);
  const client = unpreparedClient(db);
  const conditions = and(...waitConditions(f));
  // Open waits have no resolving signal (waits_received_has_signal): no join to find one (planning
  // it cost Postgres more than running a page of them).
  const select = () => (f.status === "waiting" ? q.select(getTableColumns(waits)).from(waits) : selectWaits(q));
  const page = rawWaits(client, select().where(conditions).orderBy(asc(waits.createdAt), asc(waits.id)).limit(sql.placeholder("limit")));
  if (!(f.status === "waiting" && (f.deadlineBefore !== undefined || f.deadlineAfter !== undefined))) return { page };
  // How many, up to FEW_BY_DEADLINE + 1: a range of the index on open deadlines, in its order,
  // read from the index alone when the filter is the name and deadlines (no heap page read).
  const firstByDeadline = (column: typeof waits.timeoutAt | typeof waits.id) =>
    q.select({ c: column }).from(waits).where(conditions).orderBy(asc(waits.timeoutAt)).limit(FEW_BY_DEADLINE + 1);
  const counted = firstByDeadline(waits.timeoutAt).as("counted");
  const count = q.select({ n: sql<number>`count(*)::int` }).from(counted);
  // Few: gathered by that range, then sorted (the database's order: its microseconds, its
  // collation), and the filter again in this statement's snapshot (one may have resolved).
  const few = select()
    .where(and(sql`${waits.id} in (${firstByDeadline(waits.id)})`, conditions))
    .orderBy(asc(waits.createdAt), asc(waits.id))
    .limit(sql.placeholder("limit"));
  return { page, count: builtOnce(count), few: rawWaits(client, few) };
}

/**
 * A select of waits run on postgres.js itself, its rows mapped by waitRowFromSql: drizzle maps
 * every column of every row through its column objects (0.35–0.45 ms more for 51 rows, of a
 * 50-wait page's 2.5–3 ms of signalbox's CPU).
 */
function rawWaits(client: postgres.Sql, query: { toSQL(): { sql: string; params: unknown[] } }) {
  const { sql: text, params } = query.toSQL();
  return {
    async execute(values: Record<string, unknown>): Promise<WaitRow[]> {
      // Its values are strings and numbers, each typed by the statement (a cast, or the column it is
      // compared with): sent with them in one round trip, not described first to learn their types
      // (patches/postgres+*.patch, textParameters).
      const rows = await client.unsafe(text, fillPlaceholders(params, values) as never[], { prepare: false, textParameters: true } as postgres.UnsafeQueryOptions);
      return rows.map(waitRowFromSql);
    },
  };
}

/** A row of a select of waits as postgres.js gives it: the wait's columns, and those of the signal that resolved it when joined. */
function waitRowFromSql(r: Record<string, unknown>): WaitRow {
  const result = r.received_at == null ? null : signalResultFromSql(r);
  return Object.assign(waitFromSql(r), { result }); // not a copy of every column: this runs for every row of a page
}

/** The resolving signal's part of a wait (WaitRow.result), from its columns as Postgres gives them. */
function signalResultFromSql(r: { sequence?: unknown; payload?: unknown; received_at?: unknown }): NonNullable<WaitRow["result"]> {
  // The sequence is a bigint (postgres.js gives a BigInt; JSON and drizzle's column, a number).
  return { sequence: Number(r.sequence), payload: r.payload as string | null, receivedAt: new Date(String(r.received_at)) };
}

const listQueries = new WeakMap<Db, Map<string, ReturnType<typeof buildListQueries>>>();

function listQueriesFor(db: Db, f: WaitFilter) {
  const byShape = keptFor(listQueries, db, () => new Map());
  // Which filters are given, and whether the waits are open: their statements differ (buildListQueries).
  const given = (Object.keys(f) as Array<keyof WaitFilter>).filter((k) => f[k] !== undefined && !(k === "metadata" && Object.keys(f.metadata!).length === 0));
  const shape = `${given.sort().join(",")}${f.status === "waiting" ? ";open" : ""}`;
  return keptFor(byShape, shape, () => buildListQueries(db, f));
}

/** The placeholders' values of waitConditions. */
function filterValues(f: WaitFilter): Record<string, unknown> {
  return {
    runId: f.runId,
    parentWaitId: f.parentWaitId,
    signal: f.signal,
    status: f.status,
    delivery: f.delivery,
    metadata: f.metadata && JSON.stringify(f.metadata),
    deadlineBefore: f.deadlineBefore?.toISOString(),
    deadlineAfter: f.deadlineAfter?.toISOString(),
    kind: f.kind,
    createdBefore: f.createdBefore?.toISOString(),
    afterAt: f.after?.createdAt.toISOString(),
    afterId: f.after?.id,
  };
}

/** The filters given, with a placeholder for each value (filterValues). */
function waitConditions(f: WaitFilter): SQL[] {
  const at = (name: string) => sql`${sql.placeholder(name)}::timestamptz`;
  const conditions: SQL[] = [];
  if (f.runId !== undefined) conditions.push(eq(waits.runId, sql.placeholder("runId")));
  if (f.parentWaitId !== undefined) conditions.push(eq(waits.parentWaitId, sql.placeholder("parentWaitId")));
  if (f.signal !== undefined) conditions.push(eq(waits.signal, sql.placeholder("signal")));
  if (f.status !== undefined) conditions.push(eq(waits.status, sql.placeholder("status")));
  // Not indexed (an index would cost every delivery's status update its HOT update): a filter
  // beside the others, or GET /deliveries, which has its own index, for failing deliveries.
  if (f.delivery !== undefined) conditions.push(eq(waits.deliveryStatus, sql.placeholder("delivery")));
  if (f.metadata && Object.keys(f.metadata).length > 0) {
    // The second clause is implied by the first (the filter is not empty); it lets the planner use the partial GIN index.
    conditions.push(sql`${waits.metadata} @> ${sql.placeholder("metadata")}::jsonb and ${waits.metadata} <> '{}'::jsonb`);
  }
  if (f.deadlineBefore) conditions.push(sql`${waits.timeoutAt} < ${at("deadlineBefore")}`);
  if (f.deadlineAfter) conditions.push(sql`${waits.timeoutAt} > ${at("deadlineAfter")}`);
  if (f.kind !== undefined) conditions.push(eq(waits.kind, sql.placeholder("kind")));
  if (f.createdBefore) conditions.push(sql`${waits.createdAt} < ${at("createdBefore")}`);
  if (f.after) conditions.push(sql`(${waits.createdAt}, ${waits.id}) > (${at("afterAt")}, ${sql.placeholder("afterId")}::text)`);
  return conditions;
}

export type WaitWithEvent = { wait: WaitRow; event: { id: number; type: string; occurredAt: Date } };

/** What signalbox.receive_handing_off (db/functions/accept_signals.sql) gives for a wait it resolved. */
export interface WaitWithEventJson {
  wait: Record<string, unknown>;
  event: { id: number; type: string; occurred_at: string };
  result: { sequence: number; payload: string | null; received_at: string } | null;
}

/**
 * A wait with its event, from the JSON Postgres made of them (`to_json` of the row, times as
 * ISO text), as findWaitsWithEvents reads them: intake gets what a callback it hands off
 * carries with its answer, and need not read it back.
 */
export function waitWithEventFromJson(j: WaitWithEventJson): WaitWithEvent {
  const result = j.result && signalResultFromSql(j.result);
  return { wait: Object.assign(waitFromSql(j.wait), { result }), event: { id: j.event.id, type: j.event.type, occurredAt: new Date(j.event.occurred_at) } };
}

/** Maps a raw `signalbox.waits` row (snake_case) to the drizzle row shape. */
export function waitFromSql(r: Record<string, unknown>): WaitRowOnly {
  const date = (v: unknown) => (v === null || v === undefined ? null : v instanceof Date ? v : new Date(String(v)));
  return {
    id: String(r.id),
    runId: String(r.run_id),
    signal: String(r.signal),
    key: (r.key as string | null) ?? null,
    status: String(r.status),
    createdAt: date(r.created_at)!,
    timeoutAt: date(r.timeout_at),
    resolvedAt: date(r.resolved_at),
    metadata: r.metadata ?? {},
    callbackUrl: (r.callback_url as string | null) ?? null,
    signalId: (r.signal_id as string | null) ?? null,
    resolutionEventId: r.resolution_event_id === null ? null : Number(r.resolution_event_id),
    deliveryStatus: String(r.delivery_status),
    deliveryAttempts: Number(r.delivery_attempts),
    deliveryLastError: (r.delivery_last_error as string | null) ?? null,
    deliveryRoundStart: Number(r.delivery_round_start ?? 0),
    deliveryRound: Number(r.delivery_round ?? 0),
    kind: String(r.kind),
    source: r.source ?? null,
    firesAt: date(r.fires_at),
    sensorPolls: Number(r.sensor_polls),
    parentWaitId: (r.parent_wait_id as string | null) ?? null,
    quorum: r.quorum ?? null,
    votes: r.votes ?? null,
    reply: r.reply ?? null,
    repliedAt: date(r.replied_at),
  };
}

/** A resolved wait with its resolution event (what a callback carries), in one query. */
export async function findWaitWithEvent(db: Db, id: string): Promise<WaitWithEvent | undefined> {
  return (await findWaitsWithEvents(db, [id]))[0];
}

/**
 * Several waits with their resolution events, in one query (the delivery engine reads a batch
 * of callbacks at once), as intake reads those it hands off (signalbox.callback_reads, one
 * statement text whatever the count: ids go as one JSON parameter). Waits with no resolution
 * event yet are left out.
 */
export async function findWaitsWithEvents(db: Db, ids: string[]): Promise<WaitWithEvent[]> {
  if (ids.length === 0) return [];
  const rows = await db.execute<{ callback: WaitWithEventJson }>(
    sql`select callback from signalbox.callback_reads(array(select json_array_elements_text(${JSON.stringify(ids)}::json)))`,
  );
  return rows.map((r) => waitWithEventFromJson(r.callback));
}
