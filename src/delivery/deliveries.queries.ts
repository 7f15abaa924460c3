import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import type { AttemptVerdict } from "./classify-response.ts";

export interface AttemptRow {
  id: number;
  /** The wait whose callback this attempt carried; null for a run start's attempt. */
  waitId: string | null;
  /** The run whose run.start event this attempt carried (signal-with-start); null for a callback's. */
  startRunId: string | null;
  attempt: number;
  eventId: number;
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  outcome: AttemptVerdict;
  callbackHost: string;
}

const attemptColumns = sql`a.id, a.wait_id as "waitId", a.start_run_id as "startRunId", a.attempt, a.event_id as "eventId", a.started_at as "startedAt",
  a.duration_ms as "durationMs", a.status_code as "statusCode", a.error, a.outcome, a.callback_host as "callbackHost"`;

/** Drivers hand back bigints and timestamps their own way: one shape here. */
function attemptFrom(r: Record<string, unknown>): AttemptRow {
  return {
    id: Number(r.id),
    waitId: (r.waitId as string | null) ?? null,
    startRunId: (r.startRunId as string | null) ?? null,
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

/** A run start's attempts, oldest first, after attempt row `afterId` (as listWaitAttempts). */
export async function listStartAttempts(q: Queryable, runId: string, afterId: number, limit: number): Promise<AttemptRow[]> {
  const rows = await q.execute<Record<string, unknown>>(sql`
    select ${attemptColumns} from signalbox.delivery_attempts a
    where a.start_run_id = ${runId}::text and a.id > ${afterId}::bigint
    order by a.id limit ${limit + 1}::int`);
  return rows.map(attemptFrom);
}

export interface FailingDeliveryRow {
  /** callback: a wait's resume callback; start: a run's run.start event (signal-with-start). */
  kind: "callback" | "start";
  /** Null for a start. */
  waitId: string | null;
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
  const statusOf = (alias: string) => {
    const column = sql.raw(`${alias}.delivery_status`);
    return f.status ? sql`${column} = ${f.status}::text` : sql`${column} in ('pending', 'failed')`;
  };
  // A failed delivery's latest attempt gave up: the wait lookup is spared for retries.
  const outcome = f.status === "failed" ? sql`and a.outcome = 'failed'` : sql``;
  const host = f.callbackHost !== undefined ? sql`and a.callback_host = ${f.callbackHost}::text` : sql``;
  const after = f.after ? sql`and (a.started_at, a.id) > (${f.after.startedAt.toISOString()}::timestamptz, ${f.after.id}::bigint)` : sql``;
  // The attempts drive, in index order, each joined to its wait by primary key, so a page stops
  // after `limit` matches. The join is a LATERAL with LIMIT 1 (a wait per attempt) so the
  // planner cannot turn it into a hash join over every wait of that status (a scan of waits).
  // A run start's attempt (start_run_id) joins its run_starts row the same way; each branch is
  // skipped by a one-time filter when the attempt is not of its kind.
  const rows = await q.execute<Record<string, unknown>>(sql`
    select ${attemptColumns}, w.* from signalbox.delivery_attempts a
    cross join lateral (
      (select 'callback' as kind, w.run_id as "runId", w.signal, w.delivery_status as status, w.delivery_attempts as attempts, w.delivery_last_error as "lastError"
       from signalbox.waits w
       where a.wait_id is not null and w.id = a.wait_id and w.delivery_attempts = a.attempt and ${statusOf("w")}
       limit 1)
      union all
      (select 'start', s.run_id, s.signal, s.delivery_status, s.delivery_attempts, s.delivery_last_error
       from signalbox.run_starts s
       where a.start_run_id is not null and s.run_id = a.start_run_id and s.delivery_attempts = a.attempt and ${statusOf("s")}
       limit 1)
    ) w
    where a.latest and a.outcome <> 'delivered' ${outcome} ${host} ${after}
    order by a.started_at, a.id
    limit ${limit + 1}::int`);
  return rows.map((r) => ({
    kind: r.kind as "callback" | "start",
    waitId: (r.waitId as string | null) ?? null,
    runId: String(r.runId),
    signal: String(r.signal),
    status: r.status as "pending" | "failed",
    attempts: Number(r.attempts),
    lastError: (r.lastError as string | null) ?? null,
    last: attemptFrom(r),
  }));
}
