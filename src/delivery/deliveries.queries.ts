import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import type { AttemptVerdict } from "./classify-response.ts";

export interface AttemptRow {
  id: number;
  waitId: string;
  attempt: number;
  eventId: number;
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  outcome: AttemptVerdict;
  callbackHost: string;
}

const attemptColumns = sql`a.id, a.wait_id as "waitId", a.attempt, a.event_id as "eventId", a.started_at as "startedAt",
  a.duration_ms as "durationMs", a.status_code as "statusCode", a.error, a.outcome, a.callback_host as "callbackHost"`;

/** Drivers hand back bigints and timestamps their own way: one shape here. */
function attemptFrom(r: Record<string, unknown>): AttemptRow {
  return {
    id: Number(r.id),
    waitId: String(r.waitId),
    attempt: Number(r.attempt),
    eventId: Number(r.eventId),
    startedAt: r.startedAt instanceof Date ? r.startedAt : new Date(String(r.startedAt)),
    durationMs: Number(r.durationMs),
    statusCode: r.statusCode === null ? null : Number(r.statusCode),
    error: (r.error as string | null) ?? null,
    outcome: r.outcome as AttemptVerdict,
    callbackHost: String(r.callbackHost),
  };
}

/**
 * A wait's attempts, oldest first, after attempt row `afterId`; limit + 1 rows to know if there
 * is more. Row ids follow attempt numbers within a wait: attempt n+1 is recorded only once
 * attempt n's row has committed (the compare-and-set on the wait's count).
 */
export async function listWaitAttempts(q: Queryable, waitId: string, afterId: number, limit: number): Promise<AttemptRow[]> {
  const rows = await q.execute<Record<string, unknown>>(sql`
    select ${attemptColumns} from signalbox.delivery_attempts a
    where a.wait_id = ${waitId}::text and a.id > ${afterId}::bigint
    order by a.id limit ${limit + 1}::int`);
  return rows.map(attemptFrom);
}

export interface FailingDeliveryRow {
  waitId: string;
  runId: string;
  signal: string;
  status: "pending" | "failed";
  attempts: number;
  lastError: string | null;
  last: AttemptRow;
}

export interface FailingFilter {
  /** Both when absent. */
  status?: "pending" | "failed";
  callbackHost?: string;
  after?: { startedAt: Date; id: number };
}

/**
 * Deliveries whose latest attempt failed: `failed` ones, and `pending` ones (a retry, or a
 * redelivery, is due), ordered by that attempt's time, oldest first. Read from the partial
 * indexes of latest failing attempts (by time, or by host and time): they hold only the
 * deliveries failing now, however many attempts the table keeps.
 */
export async function listFailingDeliveries(q: Queryable, f: FailingFilter, limit: number): Promise<FailingDeliveryRow[]> {
  const status = f.status ? sql`w.delivery_status = ${f.status}::text` : sql`w.delivery_status in ('pending', 'failed')`;
  // A failed delivery's latest attempt gave up: the wait lookup is spared for retries.
  const outcome = f.status === "failed" ? sql`and a.outcome = 'failed'` : sql``;
  const host = f.callbackHost !== undefined ? sql`and a.callback_host = ${f.callbackHost}::text` : sql``;
  const after = f.after ? sql`and (a.started_at, a.id) > (${f.after.startedAt.toISOString()}::timestamptz, ${f.after.id}::bigint)` : sql``;
  // The attempts drive, in index order, each joined to its wait by primary key, so a page stops
  // after `limit` matches. The join is a LATERAL with LIMIT 1 (a wait per attempt) so the
  // planner cannot turn it into a hash join over every wait of that status (a scan of waits).
  const rows = await q.execute<Record<string, unknown>>(sql`
    select ${attemptColumns}, w.* from signalbox.delivery_attempts a
    cross join lateral (
      select w.run_id as "runId", w.signal, w.delivery_status as status, w.delivery_attempts as attempts, w.delivery_last_error as "lastError"
      from signalbox.waits w
      where w.id = a.wait_id and w.delivery_attempts = a.attempt and ${status}
      limit 1
    ) w
    where a.latest and a.outcome <> 'delivered' ${outcome} ${host} ${after}
    order by a.started_at, a.id
    limit ${limit + 1}::int`);
  return rows.map((r) => ({
    waitId: String(r.waitId),
    runId: String(r.runId),
    signal: String(r.signal),
    status: r.status as "pending" | "failed",
    attempts: Number(r.attempts),
    lastError: (r.lastError as string | null) ?? null,
    last: attemptFrom(r),
  }));
}
