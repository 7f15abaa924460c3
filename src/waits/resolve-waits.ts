import { sql, type SQL } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import type { WaitStatus } from "./wait-view.ts";

/** How a wait leaves `waiting`; its history event follows from the status (signalbox.resolution_event). */
export type Resolution = {
  data?: Record<string, unknown>;
  /** Timeouts: only a wait whose deadline has passed (a moved deadline is left alone). */
  dueOnly?: boolean;
} & ({ status: "received"; signalId: string } | { status: "timed_out" | "cancelled" });

/** The resolution statuses and the history event each records, as db/functions/constants.sql has them. */
export const RESOLUTION_EVENTS = {
  received: "signal.received",
  timed_out: "signal.timeout",
  cancelled: "signal.cancelled",
} as const satisfies Record<Exclude<WaitStatus, "waiting">, string>;

/** Which waits: by id, or every open wait a condition on `signalbox.waits` selects. */
export type WaitSelector = { ids: string[] } | { where: SQL };

/** A wait that resolve_waits moved out of `waiting`: what its callers read of it. */
export interface ResolvedWait {
  id: string;
  timeoutAt: Date | null;
  resolvedAt: Date;
}

/**
 * The one way a wait leaves `waiting`: a thin wrapper over signalbox.resolve_waits
 * (db/functions/resolve_waits.sql), which in the caller's transaction does the
 * compare-and-set, the history event, the wake-up, drops the wait's pending jobs, queues its
 * callback and settles composites. Returns the waits it resolved (none when it lost the race).
 * The caller holds the runs' locks.
 */
export async function resolveWaits(tx: Queryable, which: WaitSelector, r: Resolution): Promise<ResolvedWait[]> {
  const ids =
    "ids" in which
      ? sql`array(select json_array_elements_text(${JSON.stringify(which.ids)}::json))`
      : sql`array(select id from signalbox.waits where ${which.where} and status = 'waiting' order by created_at, id)`;
  const signalIds = r.status === "received" ? sql`array[${r.signalId}::text]` : sql`null::text[]`;
  const rows = await tx.execute<{ id: string; timeout_at: Date | string | null; resolved_at: Date | string }>(sql`
    select id, timeout_at, resolved_at from signalbox.resolve_waits(${ids}, ${r.status}::text, ${signalIds}, ${JSON.stringify(r.data ?? {})}::jsonb,
      null::tid[], ${r.dueOnly ?? false}::boolean)`);
  const date = (v: Date | string) => (v instanceof Date ? v : new Date(v));
  return rows.map((w) => ({ id: w.id, timeoutAt: w.timeout_at === null ? null : date(w.timeout_at), resolvedAt: date(w.resolved_at) }));
}

/**
 * Receives a wait with a payload signalbox raised itself (a timer, a sensor): the payload is
 * recorded as an accepted signal of the run, then the wait resolves with it
 * (signalbox.receive_raised). The caller holds the run's lock and saw the wait waiting; if it
 * is not, this throws and the transaction rolls back.
 */
export async function receiveWait(tx: Queryable, waitId: string, payload: unknown): Promise<void> {
  await tx.execute(sql`select signalbox.receive_raised(${waitId}::text, ${JSON.stringify(payload)}::text)`);
}
