import type { Deps } from "../deps.ts";
import { parseJsonText } from "../core/json-text.ts";
import { decodeCursor, page } from "../core/pagination.ts";
import { listSignals, type ListedSignal, type SignalFilter } from "./signals.queries.ts";
import type { RecordOutcome } from "./signal-outcome.ts";

export function toSignalResource(s: ListedSignal) {
  return {
    id: s.id,
    run_id: s.runId,
    signal: s.signal,
    sequence: s.sequence,
    outcome: s.outcome as RecordOutcome,
    payload: s.payload === null ? null : parseJsonText(s.payload),
    payload_bytes: s.payloadBytes,
    idempotency_key: s.idempotencyKey,
    validation_errors: (s.validationErrors as Array<{ path: string; message: string }> | null) ?? null,
    wait_id: s.waitId,
    received_at: s.receivedAt.toISOString(),
    redriven_from: s.redrivenFrom,
    redriven_as: s.redrivenAs,
  };
}

/** A run's signals, or the signal log across runs filtered by outcome (dead letters): oldest first. */
export async function findSignals(deps: Pick<Deps, "db">, q: Omit<SignalFilter, "after"> & { limit: number; cursor?: string }) {
  const after = decodeCursor(q.cursor);
  const { limit, cursor: _cursor, ...filter } = q;
  const rows = await listSignals(deps.db, { ...filter, after: after && { receivedAt: after.at, id: after.id } }, limit);
  return page(rows, limit, (s) => ({ at: s.receivedAt, id: s.id }), toSignalResource);
}
