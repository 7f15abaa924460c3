import { and, asc, eq, getTableColumns, isNotNull, or, sql, type SQL } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import { signals } from "../db/schema.ts";
import type { ValidationIssue } from "../core/errors.ts";
import { toStorable } from "../core/storable-text.ts";

export type SignalRow = typeof signals.$inferSelect;

export interface NewSignal {
  id: string;
  runId: string;
  signal: string;
  outcome: string;
  payload: string | null;
  payloadHash: string | null;
  idempotencyKey: string | null;
  waitId?: string | null;
  validationErrors?: ValidationIssue[] | null;
  bufferTtlS?: number;
}

/** The accepted signal (received or buffered) that holds this idempotency key, if any. */
export async function findAcceptedByKey(q: Queryable, runId: string, signal: string, key: string): Promise<SignalRow | undefined> {
  const [row] = await q
    .select()
    .from(signals)
    .where(and(eq(signals.runId, runId), eq(signals.signal, signal), eq(signals.idempotencyKey, key), isNotNull(signals.sequence)));
  return row;
}

/**
 * Records an accepted signal with the run's next sequence number, in one statement. The run row
 * is locked by the caller, so sequences are handed out in commit order with no gaps.
 */
export async function insertAcceptedSignal(q: Queryable, s: NewSignal): Promise<number> {
  const expires = s.bufferTtlS ? sql`now() + ${s.bufferTtlS}::int * interval '1 second'` : sql`null`;
  const [row] = await q.execute<{ sequence: string | number }>(sql`
    with r as (
      update signalbox.runs set last_sequence = last_sequence + 1 where run_id = ${s.runId}::text returning last_sequence
    )
    insert into signalbox.signals
      (id, run_id, signal, sequence, outcome, payload, payload_hash, idempotency_key, wait_id, buffer_expires_at)
    select ${s.id}::text, ${s.runId}::text, ${s.signal}::text, r.last_sequence, ${s.outcome}::text, ${s.payload}::text,
           ${s.payloadHash}::text, ${s.idempotencyKey}::text, ${s.waitId ?? null}::text, ${expires}
    from r
    returning sequence`);
  return Number(row!.sequence);
}

/** Records a rejected signal: kept for inspection (dead letters), never numbered. */
export async function insertRejectedSignal(q: Queryable, s: NewSignal): Promise<void> {
  await q.insert(signals).values({
    id: s.id,
    runId: s.runId,
    signal: s.signal,
    outcome: s.outcome,
    payload: s.payload,
    payloadHash: s.payloadHash,
    idempotencyKey: s.idempotencyKey,
    validationErrors: s.validationErrors ? s.validationErrors.map(storable) : null,
  });
}

/** jsonb holds neither NUL nor unpaired surrogates: a pointer naming such a key is shown with U+FFFD. */
const storable = (issue: ValidationIssue): ValidationIssue => ({
  path: toStorable(issue.path),
  message: toStorable(issue.message),
});

export interface SignalFilter {
  runId?: string;
  outcome?: string;
  after?: { receivedAt: Date; id: string };
}

/**
 * A buffered signal never consumed whose TTL has passed: `expired` from that instant, before the
 * retention job stores it so (src/retention). Waits take only buffered signals before their
 * expiry (open_wait, openWait), so what is shown expired is never consumed.
 */
const expiredNow = sql`(${signals.outcome} = 'buffered' and ${signals.waitId} is null and ${signals.bufferExpiresAt} <= now())`;

/** The outcome a signal record shows. */
const shownOutcome = sql<string>`case when ${expiredNow} then 'expired' else ${signals.outcome} end`;

function outcomeIs(outcome: string): SQL {
  if (outcome === "expired") return or(eq(signals.outcome, "expired"), expiredNow)!;
  if (outcome === "buffered") return sql`${signals.outcome} = 'buffered' and not ${expiredNow}`;
  return eq(signals.outcome, outcome);
}

export async function listSignals(q: Queryable, f: SignalFilter, limit: number): Promise<SignalRow[]> {
  const conditions: SQL[] = [];
  if (f.runId !== undefined) conditions.push(eq(signals.runId, f.runId));
  if (f.outcome !== undefined) conditions.push(outcomeIs(f.outcome));
  if (f.after) {
    conditions.push(sql`(${signals.receivedAt}, ${signals.id}) > (${f.after.receivedAt.toISOString()}::timestamptz, ${f.after.id}::text)`);
  }
  return q
    .select({ ...getTableColumns(signals), outcome: shownOutcome })
    .from(signals)
    .where(and(...conditions))
    .orderBy(asc(signals.receivedAt), asc(signals.id))
    .limit(limit + 1);
}

/**
 * Claims a signed webhook id for a run; returns the run that holds it (this one, or the one
 * that claimed it first). The primary key decides between concurrent claims, not a read.
 */
export async function claimWebhookId(q: Queryable, signalType: string, webhookId: string, runId: string, keepS: number): Promise<string> {
  const claimed = await q.execute<{ run_id: string }>(sql`
    insert into signalbox.webhook_receipts (signal_type, webhook_id, run_id, expires_at)
    values (${signalType}::text, ${webhookId}::text, ${runId}::text, now() + ${keepS}::int * interval '1 second')
    on conflict (signal_type, webhook_id) do nothing
    returning run_id`);
  if (claimed[0]) return claimed[0].run_id;
  // A separate statement: its snapshot sees the claim that won, even one committed a moment ago.
  const [holder] = await q.execute<{ run_id: string }>(sql`
    select run_id from signalbox.webhook_receipts where signal_type = ${signalType}::text and webhook_id = ${webhookId}::text`);
  return holder?.run_id ?? runId;
}

/** Webhook ids past their replay window are no longer needed to refuse a replay. */
export async function purgeExpiredReceipts(q: Queryable): Promise<number> {
  const rows = await q.execute(sql`delete from signalbox.webhook_receipts where expires_at < now() returning 1`);
  return rows.length;
}

export interface IncomingSignal {
  sequence: number;
  outcome: "received" | "buffered";
  waitId: string | null;
  quorum: { count: number; veto?: string[] } | null;
}

/**
 * Records a signal against the run's open wait for its name (received) or, with no open wait
 * and `bufferTtlS` > 0, as buffered; either way with the run's next sequence number, in one
 * statement. Returns undefined (nothing written) when there is no open wait and no buffering.
 * With `onlyWaitId`, only that wait counts as the open one (any other open wait of the name is
 * as good as none). The caller holds the run's lock, so the open wait cannot change underneath.
 */
export async function insertIncomingSignal(q: Queryable, s: NewSignal, bufferTtlS: number, onlyWaitId?: string): Promise<IncomingSignal | undefined> {
  const [row] = await q.execute<{ sequence: string | number; outcome: "received" | "buffered"; wait_id: string | null; quorum: IncomingSignal["quorum"] }>(sql`
    with w as (
      select id, quorum from signalbox.waits
      where run_id = ${s.runId}::text and signal = ${s.signal}::text and status = 'waiting'
        and (${onlyWaitId ?? null}::text is null or id = ${onlyWaitId ?? null}::text)
    ), r as (
      update signalbox.runs set last_sequence = last_sequence + 1
      where run_id = ${s.runId}::text and (exists (select 1 from w) or ${bufferTtlS}::int > 0)
      returning last_sequence
    )
    insert into signalbox.signals
      (id, run_id, signal, sequence, outcome, payload, payload_hash, idempotency_key, wait_id, buffer_expires_at)
    select ${s.id}::text, ${s.runId}::text, ${s.signal}::text, r.last_sequence,
           case when w.id is null then 'buffered' else 'received' end,
           ${s.payload}::text, ${s.payloadHash}::text, ${s.idempotencyKey}::text, w.id,
           case when w.id is null then now() + ${bufferTtlS}::int * interval '1 second' end
    from r left join w on true
    returning sequence, outcome, wait_id, (select quorum from w) as quorum`);
  if (!row) return undefined;
  return { sequence: Number(row.sequence), outcome: row.outcome, waitId: row.wait_id, quorum: row.quorum };
}
