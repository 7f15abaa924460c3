import { and, asc, eq, gt, sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import { events } from "../db/schema.ts";

export const EVENT_TYPES = [
  "signal.waiting",
  "signal.received",
  "signal.buffered",
  "signal.timeout",
  "signal.cancelled",
  "signal.vote",
  "run.started",
  "run.pausing",
  "run.paused",
  "run.resumed",
  "run.cancelling",
  "run.cancelled",
  "run.continued",
  "run.continued_from",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface NewEvent {
  runId: string;
  type: EventType;
  waitId?: string | null;
  signalId?: string | null;
  data?: Record<string, unknown>;
}

export async function recordEvent(q: Queryable, e: NewEvent): Promise<void> {
  await recordEvents(q, [e]);
}

/** Several events in one statement, in the order given. */
export async function recordEvents(q: Queryable, list: NewEvent[]): Promise<void> {
  if (list.length === 0) return;
  await q.insert(events).values(list.map((e) => ({ runId: e.runId, type: e.type, waitId: e.waitId ?? null, signalId: e.signalId ?? null, data: e.data ?? {} })));
}

export async function listRunEvents(q: Queryable, runId: string, afterId: number, limit: number) {
  return q
    .select()
    .from(events)
    .where(and(eq(events.runId, runId), gt(events.id, afterId)))
    .orderBy(asc(events.id))
    .limit(limit + 1);
}

export type EventRow = typeof events.$inferSelect;

export const eventId = (id: number) => `ev_${id}`;
/** Parses `ev_<n>`; anything else is undefined. */
export function parseEventId(id: string): number | undefined {
  const m = /^ev_([1-9][0-9]{0,17})$/.exec(id);
  return m ? Number(m[1]) : undefined;
}

export function toEventResource(e: EventRow) {
  return {
    id: eventId(e.id),
    run_id: e.runId,
    type: e.type as EventType,
    wait_id: e.waitId,
    signal_id: e.signalId,
    data: e.data as Record<string, unknown>,
    occurred_at: e.occurredAt.toISOString(),
  };
}

/** The next event id, taken before the event row exists so a wait can point at it in the same statement. */
export const nextEventId = sql`nextval(pg_get_serial_sequence('signalbox.events', 'id'))`;
