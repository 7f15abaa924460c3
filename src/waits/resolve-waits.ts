import { sql, type SQL } from "drizzle-orm";
import type { Tx } from "../db/client.ts";
import { WAIT_CHANGED_CHANNEL } from "../events/change-feed.ts";
import { nextEventId, type EventType } from "../events/events.queries.ts";
import { addJobsForIds, jobKeys, removeJobs } from "../jobs/enqueue.ts";
import type { WaitRowOnly } from "./wait-view.ts";

export interface Resolution {
  status: "received" | "timed_out" | "cancelled";
  event: Extract<EventType, "signal.received" | "signal.timeout" | "signal.cancelled">;
  signalId?: string;
  data?: Record<string, unknown>;
}

/**
 * The one way a wait leaves `waiting`: a compare-and-set on status, so whichever of signal,
 * timeout or cancel commits first wins and the others change nothing. In the same statement it
 * records the resolution event and NOTIFYs long-pollers; then it drops the pending timeout and
 * queues the callback. Returns the waits it resolved (none when it lost the race).
 */
export async function resolveWaits(tx: Tx, where: SQL, r: Resolution): Promise<WaitRowOnly[]> {
  const rows = await tx.execute<Record<string, unknown>>(sql`
    with w as (
      update signalbox.waits set
        status = ${r.status}::text,
        resolved_at = now(),
        signal_id = ${r.signalId ?? null}::text,
        resolution_event_id = ${nextEventId},
        delivery_status = case when callback_url is null then 'none' else 'pending' end
      where ${where} and status = 'waiting'
      returning *
    ), e as (
      insert into signalbox.events (id, run_id, type, wait_id, signal_id, data, occurred_at)
      select resolution_event_id, run_id, ${r.event}::text, id, signal_id, ${JSON.stringify(r.data ?? {})}::jsonb, resolved_at from w
    )
    select w.* from w cross join lateral (select pg_notify(${WAIT_CHANGED_CHANNEL}::text, w.id)) as notified`);
  const resolved = rows.map(waitFromSql);
  if (resolved.length === 0) return resolved;
  if (r.status !== "timed_out") await removeJobs(tx, resolved.filter((w) => w.timeoutAt).map((w) => jobKeys.expire(w.id)));
  const withCallback = resolved.filter((w) => w.callbackUrl).map((w) => w.id);
  await addJobsForIds(tx, "deliver_callback", withCallback, jobKeys.deliver(""));
  return resolved;
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
  };
}
