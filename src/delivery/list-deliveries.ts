import type { Deps } from "../deps.ts";
import { BadRequestError, NotFoundError } from "../core/errors.ts";
import { decodeCursor, page } from "../core/pagination.ts";
import { eventId } from "../events/events.queries.ts";
import { findWait } from "../waits/waits.queries.ts";
import { findStart } from "./starts.queries.ts";
import { listFailingDeliveries, listStartAttempts, listWaitAttempts, type AttemptRow, type FailingDeliveryRow, type FailingFilter } from "./deliveries.queries.ts";

/** Attempt ids as the API shows them: `dl_<n>`. */
export const attemptId = (id: number) => `dl_${id}`;

export function toAttemptResource(a: AttemptRow) {
  return {
    id: attemptId(a.id),
    wait_id: a.waitId!, // listed by wait: always set
    attempt: a.attempt,
    webhook_id: eventId(a.eventId),
    started_at: a.startedAt.toISOString(),
    duration_ms: a.durationMs,
    status_code: a.statusCode,
    error: a.error,
    outcome: a.outcome,
    callback_host: a.callbackHost,
  };
}

/** A run start's attempt (GET /runs/{run}/start/deliveries): as a callback's, named by its run. */
export function toStartAttemptResource(a: AttemptRow) {
  const { wait_id: _none, ...rest } = toAttemptResource(a);
  return { ...rest, run_id: a.startRunId! };
}

export function toFailingDeliveryResource(d: FailingDeliveryRow) {
  return {
    kind: d.kind,
    wait_id: d.waitId,
    run_id: d.runId,
    signal: d.signal,
    status: d.status,
    callback_host: d.last.callbackHost,
    attempts: d.attempts,
    last_error: d.lastError,
    last_status_code: d.last.statusCode,
    last_attempt_at: d.last.startedAt.toISOString(),
  };
}

/** The position a cursor of these lists holds: a time and an attempt row (`dl_<n>`). */
function decodeAttemptCursor(cursor: string | undefined): { at: Date; id: number } | undefined {
  const p = decodeCursor(cursor);
  if (!p) return undefined;
  const m = /^dl_([1-9][0-9]{0,17})$/.exec(p.id);
  if (!m) throw new BadRequestError("the cursor is not one this server handed out", [{ path: "/cursor", message: "is invalid" }]);
  return { at: p.at, id: Number(m[1]) };
}

/** GET /waits/{id}/deliveries: every recorded attempt of the wait's callback, oldest first. */
export async function listWaitDeliveries(deps: Pick<Deps, "db">, waitId: string, q: { limit: number; cursor?: string }) {
  const after = decodeAttemptCursor(q.cursor);
  if (!(await findWait(deps.db, waitId))) throw new NotFoundError(`no wait with id '${waitId}'`);
  const rows = await listWaitAttempts(deps.db, waitId, after?.id ?? 0, q.limit);
  return page(rows, q.limit, (a) => ({ at: a.startedAt, id: attemptId(a.id) }), toAttemptResource);
}

/** GET /runs/{run}/start/deliveries: every recorded attempt of the run's start event, oldest first. */
export async function listStartDeliveries(deps: Pick<Deps, "db">, runId: string, q: { limit: number; cursor?: string }) {
  const after = decodeAttemptCursor(q.cursor);
  if (!(await findStart(deps.db, runId))) throw new NotFoundError(`run '${runId}' was not started by a signal`);
  const rows = await listStartAttempts(deps.db, runId, after?.id ?? 0, q.limit);
  return page(rows, q.limit, (a) => ({ at: a.startedAt, id: attemptId(a.id) }), toStartAttemptResource);
}

/** GET /deliveries: deliveries failing now (failed, or pending after a failed attempt), across waits. */
export async function findFailingDeliveries(deps: Pick<Deps, "db">, q: Omit<FailingFilter, "after"> & { limit: number; cursor?: string }) {
  const after = decodeAttemptCursor(q.cursor);
  const rows = await listFailingDeliveries(
    deps.db,
    { status: q.status, callbackHost: q.callbackHost?.toLowerCase(), after: after && { startedAt: after.at, id: after.id } },
    q.limit,
  );
  return page(rows, q.limit, (d) => ({ at: d.last.startedAt, id: attemptId(d.last.id) }), toFailingDeliveryResource);
}
