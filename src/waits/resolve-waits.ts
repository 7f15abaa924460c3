import { sql, type SQL } from "drizzle-orm";
import type { Tx } from "../db/client.ts";
import { WAIT_CHANGED_CHANNEL } from "../events/change-feed.ts";
import { nextEventId, type EventType } from "../events/events.queries.ts";
import { addJobsForIds, jobKeys, removeJobs } from "../jobs/enqueue.ts";
import { newId } from "../core/ids.ts";
import { insertAcceptedSignal } from "../signals/signals.queries.ts";
import { toWaitResource, type WaitRowOnly } from "./wait-view.ts";
import { findWait, listWaits } from "./waits.queries.ts";

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
  // Pending jobs of a resolved wait would only find it resolved: drop them (an optimisation;
  // a job already running loses its compare-and-set).
  await removeJobs(tx, resolved.flatMap((w) => [
    ...(w.timeoutAt && r.status !== "timed_out" ? [jobKeys.expire(w.id)] : []),
    ...(w.kind === "timer" ? [jobKeys.timer(w.id)] : []),
    ...(w.kind === "sensor" ? [jobKeys.sensor(w.id)] : []),
  ]));
  const withCallback = resolved.filter((w) => w.callbackUrl).map((w) => w.id);
  await addJobsForIds(tx, "deliver_callback", withCallback, jobKeys.deliver(""));
  await settleComposites(tx, resolved);
  return resolved;
}

/**
 * Receives a wait with a payload signalbox raised itself (a timer, a sensor, a composite): the
 * payload is recorded as an accepted signal of the run, then the wait resolves with it.
 */
export async function receiveWait(tx: Tx, wait: Pick<WaitRowOnly, "id" | "runId" | "signal">, payload: unknown): Promise<boolean> {
  const signalId = newId("sg");
  await insertAcceptedSignal(tx, {
    id: signalId,
    runId: wait.runId,
    signal: wait.signal,
    outcome: "received",
    payload: JSON.stringify(payload),
    payloadHash: null,
    idempotencyKey: null,
    waitId: wait.id,
  });
  const [received] = await resolveWaits(tx, sql`id = ${wait.id}::text`, { status: "received", event: "signal.received", signalId });
  if (!received) throw new Error(`wait ${wait.id} was not waiting`); // callers hold the run lock and checked: roll back
  return true;
}

/**
 * Composite waits follow their members: a parent that left `waiting` cancels its open members;
 * a member that resolved may settle its parent. `any` is received with the first received
 * member; `all` when every member is received, and times out (or is cancelled) as soon as one
 * member does. Members share the parent's run, whose lock the caller holds, so two members
 * resolving at once settle the parent once.
 */
async function settleComposites(tx: Tx, resolved: WaitRowOnly[]): Promise<void> {
  const endedParents = resolved.filter((w) => w.kind === "all" || w.kind === "any").map((w) => w.id);
  if (endedParents.length > 0) {
    await resolveWaits(tx, sql`parent_wait_id in (select json_array_elements_text(${JSON.stringify(endedParents)}::json))`, {
      status: "cancelled",
      event: "signal.cancelled",
      data: { reason: "the composite wait it belongs to was settled" },
    });
  }
  for (const parentId of new Set(resolved.map((w) => w.parentWaitId).filter((id) => id !== null))) {
    await settleParent(tx, parentId);
  }
}

async function settleParent(tx: Tx, parentId: string): Promise<void> {
  const parent = await findWait(tx, parentId);
  if (!parent || parent.status !== "waiting") return;
  const members = await listWaits(tx, { parentWaitId: parentId }, 1000);
  const received = members.filter((m) => m.status === "received");
  const ended = members.filter((m) => m.status !== "waiting" && m.status !== "received");
  const payload = () => ({ members: Object.fromEntries(received.map((m) => [m.signal, toWaitResource(m).result])) });
  const end = (status: "timed_out" | "cancelled") =>
    resolveWaits(tx, sql`id = ${parentId}::text`, {
      status,
      event: status === "timed_out" ? "signal.timeout" : "signal.cancelled",
      data: { reason: "a member wait ended without a signal" },
    });
  if (parent.kind === "any") {
    if (received.length > 0) await receiveWait(tx, parent, payload());
    else if (ended.length === members.length) await end(ended.some((m) => m.status === "timed_out") ? "timed_out" : "cancelled");
  } else if (ended.length > 0) {
    await end(ended.some((m) => m.status === "timed_out") ? "timed_out" : "cancelled");
  } else if (received.length === members.length) {
    await receiveWait(tx, parent, payload());
  }
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
    kind: String(r.kind),
    source: r.source ?? null,
    firesAt: date(r.fires_at),
    sensorPolls: Number(r.sensor_polls),
    parentWaitId: (r.parent_wait_id as string | null) ?? null,
    quorum: r.quorum ?? null,
    votes: r.votes ?? null,
  };
}
