import { parseJsonText } from "../core/json-text.ts";
import type { signals, waits } from "../db/schema.ts";

export type WaitRowOnly = typeof waits.$inferSelect;
export type WaitRow = WaitRowOnly & {
  result: Pick<typeof signals.$inferSelect, "sequence" | "payload" | "receivedAt"> | null;
};

export type WaitStatus = "waiting" | "received" | "timed_out" | "cancelled";

/** The wait as the API shows it (and as callbacks carry it). */
export function toWaitResource(w: WaitRow) {
  return {
    id: w.id,
    run_id: w.runId,
    signal: w.signal,
    key: w.key,
    status: w.status as WaitStatus,
    created_at: w.createdAt.toISOString(),
    timeout_at: w.timeoutAt?.toISOString() ?? null,
    resolved_at: w.resolvedAt?.toISOString() ?? null,
    metadata: w.metadata as Record<string, unknown>,
    callback_url: w.callbackUrl,
    result:
      w.signalId && w.result
        ? {
            signal_id: w.signalId,
            sequence: w.result.sequence!, // the resolving signal was accepted, so it is numbered
            payload: w.result.payload === null ? null : parseJsonText(w.result.payload),
            received_at: w.result.receivedAt.toISOString(),
          }
        : null,
    kind: w.kind as "external" | "timer" | "sensor" | "all" | "any",
    fires_at: w.firesAt?.toISOString() ?? null,
    parent_wait_id: w.parentWaitId,
    ...(w.quorum ? { quorum: w.quorum as { count: number; veto?: string[] }, votes: (w.votes ?? {}) as Record<string, string[]> } : {}),
    delivery: {
      status: w.deliveryStatus as "none" | "pending" | "delivered" | "failed",
      attempts: w.deliveryAttempts,
      last_error: w.deliveryLastError,
    },
    reply: w.reply ?? null,
    replied_at: w.repliedAt?.toISOString() ?? null,
  };
}
export type WaitResource = ReturnType<typeof toWaitResource>;
