import { and, asc, desc, eq, getTableColumns, isNull, or, sql, type SQL } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import { runs, signals, waits } from "../db/schema.ts";
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

/**
 * Records a rejected signal: kept for inspection (dead letters), never numbered. Through the
 * one SQL writer of rejections, which keeps a large payload's size and digest only.
 */
export async function insertRejectedSignal(q: Queryable, s: NewSignal): Promise<void> {
  const errors = s.validationErrors ? JSON.stringify(s.validationErrors.map(storable)) : null;
  await q.execute(sql`
    select signalbox.reject_signal(${s.id}::text, ${s.runId}::text, ${s.signal}::text, ${s.outcome}::text, ${s.payload}::text,
                                   ${s.payloadHash}::text, ${s.idempotencyKey}::text, ${errors}::jsonb)`);
}

/** jsonb holds neither NUL nor unpaired surrogates: a pointer naming such a key is shown with U+FFFD. */
const storable = (issue: ValidationIssue): ValidationIssue => ({
  path: toStorable(issue.path),
  message: toStorable(issue.message),
});

export interface SignalFilter {
  runId?: string;
  /** A signal name. */
  signal?: string;
  outcome?: string;
  /** Every rejection, whatever its reason (the dead letters): the records with no sequence. */
  rejected?: boolean;
  /** Newest first (a log read from its end); the cursor then moves back in time. */
  newestFirst?: boolean;
  after?: { receivedAt: Date; id: string };
}

/**
 * A buffered signal never consumed whose TTL has passed: `expired` from that instant, before the
 * retention job stores it so (src/retention). Waits take only buffered signals before their
 * expiry (open_wait, openWait), so what is shown expired is never consumed.
 */
const expiredNow = sql`(${signals.outcome} = 'buffered' and ${signals.waitId} is null and ${signals.bufferExpiresAt} <= now())`;

/** The outcome a signal record shows. */
export const shownOutcome = sql<string>`case when ${expiredNow} then 'expired' else ${signals.outcome} end`;

export function outcomeIs(outcome: string): SQL {
  if (outcome === "expired") return or(eq(signals.outcome, "expired"), expiredNow)!;
  // `is not true`: a signal kept behind a started one has no TTL (a null expiry), so expiredNow is null.
  if (outcome === "buffered") return sql`${signals.outcome} = 'buffered' and ${expiredNow} is not true`;
  return eq(signals.outcome, outcome);
}

/** The record that redrove this one, if any (a probe of the unique index on redriven_from). */
// Spelled out: drizzle leaves a column unqualified in a one-table select, where inside this
// subquery `id` would be r's own.
const redrivenAs = sql<string | null>`(select r.id from signalbox.signals r where r.redriven_from = "signals"."id")`;

export type ListedSignal = Omit<SignalRow, "reply"> & { redrivenAs: string | null };

/** A signal's columns but its reply (up to 64 KiB each: read only for one signal, GET /signals/{id}). */
const { reply: _reply, ...listedColumns } = getTableColumns(signals);

export async function listSignals(q: Queryable, f: SignalFilter, limit: number): Promise<ListedSignal[]> {
  const conditions: SQL[] = [];
  if (f.runId !== undefined) conditions.push(eq(signals.runId, f.runId));
  if (f.signal !== undefined) conditions.push(eq(signals.signal, f.signal));
  if (f.outcome !== undefined) conditions.push(outcomeIs(f.outcome));
  // Rejections keep no wait: the wait_id condition lets the planner read signals_without_wait_received.
  if (f.rejected) conditions.push(isNull(signals.sequence), isNull(signals.waitId));
  if (f.after) {
    const position = sql`(${f.after.receivedAt.toISOString()}::timestamptz, ${f.after.id}::text)`;
    conditions.push(f.newestFirst ? sql`(${signals.receivedAt}, ${signals.id}) < ${position}` : sql`(${signals.receivedAt}, ${signals.id}) > ${position}`);
  }
  const order = f.newestFirst ? desc : asc;
  return q
    .select({ ...listedColumns, outcome: shownOutcome, redrivenAs })
    .from(signals)
    .where(and(...conditions))
    .orderBy(order(signals.receivedAt), order(signals.id))
    .limit(limit + 1);
}

/** Whether the resume callback of the wait a signal resolved has answered, and how it stands. */
export interface ReplyProgress {
  /**
   * The wait's delivery status (none: no callback_url); null while no wait has taken the signal,
   * and while the wait that counted it is still open (a vote short of its quorum).
   */
  deliveryStatus: "none" | "pending" | "delivered" | "failed" | null;
  /** When the callback was first delivered (the reply is known from then). */
  repliedAt: Date | null;
  /** Counted by an open wait that has a callback_url: a callback, and its reply, come once the wait resolves. */
  owedOnResolve: boolean;
  /** Its run is active: a buffered or started signal may still be taken by a wait (a cancelled or continued run opens none). */
  runActive: boolean;
}

export type SignalWithReply = ListedSignal & { reply: unknown; progress: ReplyProgress };

/**
 * One signal record with its reply and its wait's delivery progress, in one query. The reply is
 * the wait's when the signal has none of its own: every vote of a quorum wait was answered by
 * the one callback, though only the deciding signal keeps a copy.
 */
export async function findSignalWithReply(q: Queryable, id: string): Promise<SignalWithReply | undefined> {
  const [row] = await q
    .select({
      ...listedColumns,
      outcome: shownOutcome,
      redrivenAs,
      reply: sql<unknown>`coalesce(${signals.reply}, ${waits.reply})`,
      waitStatus: waits.status,
      callbackUrl: waits.callbackUrl,
      deliveryStatus: waits.deliveryStatus,
      repliedAt: waits.repliedAt,
      runStatus: runs.status,
    })
    .from(signals)
    .leftJoin(waits, eq(waits.id, signals.waitId))
    .leftJoin(runs, eq(runs.runId, signals.runId))
    .where(eq(signals.id, id));
  if (!row) return undefined;
  const { waitStatus, callbackUrl, deliveryStatus, repliedAt, runStatus, ...signal } = row;
  const waitOpen = waitStatus === "waiting";
  return {
    ...signal,
    reply: signal.reply ?? null,
    progress: {
      deliveryStatus: waitOpen ? null : ((deliveryStatus as ReplyProgress["deliveryStatus"]) ?? null),
      repliedAt,
      owedOnResolve: waitOpen && callbackUrl !== null,
      runActive: runStatus === "active",
    },
  };
}

/**
 * Twice the type's tolerance as declared now: a process whose cached declaration predates a raise
 * of it (until its change notice comes) would otherwise keep the receipt for the old tolerance.
 */
const keptForTypeS = (signalType: string) =>
  sql`2 * coalesce((select (t.auth ->> 'tolerance_s')::int from signalbox.signal_types t where t.name = ${signalType}::text), 0)`;

/**
 * Beyond twice the tolerance, a receipt is kept this much longer. The signature's check reads the
 * process's clock in whole seconds, bounds included (a delivery verifies until the end of its last
 * second), and that clock may run a little ahead of the database's, which dates the receipt: kept
 * exactly 2 × tolerance, it could be purged while a replay of its delivery still verified.
 */
const RECEIPT_MARGIN_S = 5;

/**
 * Claims a signed webhook id for a run; returns the run that holds it (this one, or the one
 * that claimed it first). The primary key decides between concurrent claims, not a read.
 *
 * Every verified delivery of the id keeps the claim for `keepS` from now: a sender's retry is
 * signed afresh, so it verifies past the first delivery's window, and a claim kept only that
 * long would be purged while a capture of the retry could still be replayed to another run.
 */
export async function claimWebhookId(q: Queryable, signalType: string, webhookId: string, runId: string, keepS: number): Promise<string> {
  // DO UPDATE waits for a concurrent claim to commit and returns the row that won.
  const [holder] = await q.execute<{ run_id: string }>(sql`
    insert into signalbox.webhook_receipts (signal_type, webhook_id, run_id, expires_at)
    values (${signalType}::text, ${webhookId}::text, ${runId}::text, now() + (greatest(${keepS}::int, ${keptForTypeS(signalType)}) + ${RECEIPT_MARGIN_S}::int) * interval '1 second')
    on conflict (signal_type, webhook_id) do update set expires_at = greatest(webhook_receipts.expires_at, excluded.expires_at)
    returning run_id`);
  return holder!.run_id;
}

/** Webhook ids past their replay window are no longer needed to refuse a replay. */
export async function purgeExpiredReceipts(q: Queryable): Promise<number> {
  const rows = await q.execute(sql`delete from signalbox.webhook_receipts where expires_at < now() returning 1`);
  return rows.length;
}
