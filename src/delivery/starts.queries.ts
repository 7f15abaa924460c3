import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import type { AttemptVerdict } from "./classify-response.ts";

/** A run's start (signal-with-start) with what its run.start event carries. */
export interface StartRow {
  runId: string;
  signalId: string;
  signal: string;
  url: string;
  eventId: number;
  occurredAt: Date;
  deliveryStatus: "pending" | "delivered" | "failed";
  deliveryAttempts: number;
  deliveryLastError: string | null;
  /** Rounds begun (each redelivery adds one): see waits.delivery_round. */
  deliveryRound: number;
  /** The started signal's payload as received; null once retention purged the signal. */
  payload: string | null;
  /** The run was cancelled (its engine is not to start it). */
  runCancelled: boolean;
}

export async function findStart(q: Queryable, runId: string): Promise<StartRow | undefined> {
  const [r] = await q.execute<Record<string, unknown>>(sql`
    select s.run_id, s.signal_id, s.signal, s.url, s.event_id, s.occurred_at, s.delivery_status, s.delivery_attempts,
      s.delivery_last_error, s.delivery_round, g.payload, r.status = 'cancelled' as run_cancelled
    from signalbox.run_starts s join signalbox.runs r on r.run_id = s.run_id left join signalbox.signals g on g.id = s.signal_id
    where s.run_id = ${runId}::text`);
  if (!r) return undefined;
  return {
    runId: String(r.run_id),
    signalId: String(r.signal_id),
    signal: String(r.signal),
    url: String(r.url),
    eventId: Number(r.event_id),
    occurredAt: r.occurred_at instanceof Date ? r.occurred_at : new Date(String(r.occurred_at)),
    deliveryStatus: r.delivery_status as StartRow["deliveryStatus"],
    deliveryAttempts: Number(r.delivery_attempts),
    deliveryLastError: (r.delivery_last_error as string | null) ?? null,
    deliveryRound: Number(r.delivery_round),
    payload: (r.payload as string | null) ?? null,
    runCancelled: r.run_cancelled === true,
  };
}

export interface StartAttempt {
  runId: string;
  attemptsBefore: number;
  /** The start's delivery_round when the attempt began. */
  roundBefore: number;
  verdict: AttemptVerdict;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  callbackHost: string;
}

/** Records one attempt (db/functions/start_run.sql record_start_attempt); undefined when the compare-and-set lost. */
export async function recordStartAttempt(q: Queryable, a: StartAttempt, maxAttempts: number, backoffS: number): Promise<{ outcome: AttemptVerdict; attempt: number } | undefined> {
  const [r] = await q.execute<{ outcome: AttemptVerdict; attempt: number }>(sql`
    select outcome, attempt from signalbox.record_start_attempt(${a.runId}::text, ${a.attemptsBefore}::int, ${a.verdict}::text,
      ${a.statusCode}::int, ${a.error}::text, ${a.durationMs}::int, ${a.callbackHost}::text, ${maxAttempts}::int, ${backoffS}::double precision, ${a.roundBefore}::int)`);
  return r && { outcome: r.outcome, attempt: Number(r.attempt) };
}

/**
 * Queues a run's start event again (POST /runs/{run}/start/redeliver), as a wait's redelivery
 * does: a new round of attempts from now, the attempt numbers going on. Undefined: no start.
 */
export async function requeueStart(q: Queryable, runId: string): Promise<boolean> {
  const rows = await q.execute(sql`
    update signalbox.run_starts set delivery_status = 'pending', delivery_round_start = delivery_attempts, delivery_round = delivery_round + 1
    where run_id = ${runId}::text returning 1`);
  return rows.length > 0;
}
