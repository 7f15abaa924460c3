import { NotFoundError } from "../core/errors.ts";
import { parseJsonText } from "../core/json-text.ts";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { eventId } from "../events/events.queries.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { callbackHost } from "./callback-host.ts";
import type { AttemptVerdict } from "./classify-response.ts";
import type { DeliveryEngine } from "./delivery-engine.ts";
import { ATTEMPT_TIMEOUT_MS, postSigned, type AttemptResult } from "./post-signed.ts";
import { findStart, recordStartAttempt, requeueStart, type StartRow } from "./starts.queries.ts";

type StartDeps = Pick<Deps, "db" | "config" | "secrets" | "log" | "metrics">;

/**
 * The `run.start` event of signal-with-start: `{id, type, occurred_at, run_id, signal: {id, name,
 * payload}}`. `id` is the run.started history event's id: the `webhook-id` of every attempt.
 */
export function startEventBody(s: StartRow): string {
  return JSON.stringify({
    id: eventId(s.eventId),
    type: "run.start",
    occurred_at: s.occurredAt.toISOString(),
    run_id: s.runId,
    signal: { id: s.signalId, name: s.signal, payload: s.payload === null ? null : parseJsonText(s.payload) },
  });
}

/**
 * Delivers a run's start event to its signal type's start URL (the deliver_start job), signed
 * per Standard Webhooks with the callback secret and retried like callbacks: each attempt is
 * recorded in delivery_attempts (by start_run_id) with a compare-and-set on the start's count,
 * and the next one queued with the callbacks' backoff (record_start_attempt). With the
 * delivery engine (the worker's) it goes through the endpoint gate as notifications do.
 */
export async function deliverStart(deps: StartDeps, runId: string, abort?: AbortSignal, engine?: Pick<DeliveryEngine, "sendOne">): Promise<AttemptVerdict | "skipped" | "deferred"> {
  const start = await findStart(deps.db, runId);
  if (!start || start.deliveryStatus !== "pending") return "skipped";
  if (start.runCancelled) {
    // Cancelled before its start went out (or redelivered after): a cancelled run is not started,
    // as its later signals are rejected_not_active. Recorded, so its start says why.
    return record(deps, start, { verdict: "failed", error: "not sent: the run was cancelled", seconds: 0 });
  }
  if (start.payload === null) {
    // Retention purged the started signal (a redelivery long after): there is no event to send.
    return record(deps, start, { verdict: "failed", error: "not sent: the started signal was purged by retention", seconds: 0 });
  }
  const body = startEventBody(start);
  const send = (signal?: AbortSignal) => postSigned(start.url, eventId(start.eventId), body, deps.secrets.callbackSecret, signal);
  if (!engine) return record(deps, start, await send(abort));
  let verdict: AttemptVerdict | "deferred" = "deferred";
  await engine.sendOne(
    {
      host: callbackHost(start.url),
      job: { task: "deliver_start", id: runId, jobKey: jobKeys.start(runId) },
      limitMs: ATTEMPT_TIMEOUT_MS,
      send,
      failed: (attempt) => attempt.verdict === "retry",
      abandoned: (attempt) => attempt.abandoned === true,
      settle: async (attempt) => void (verdict = await record(deps, start, attempt)),
    },
    abort,
  );
  return verdict;
}

async function record(deps: StartDeps, start: StartRow, attempt: AttemptResult): Promise<AttemptVerdict> {
  const recorded = await recordStartAttempt(
    deps.db,
    {
      runId: start.runId,
      attemptsBefore: start.deliveryAttempts,
      roundBefore: start.deliveryRound,
      verdict: attempt.verdict,
      statusCode: attempt.status ?? null,
      error: attempt.error,
      durationMs: Math.round(attempt.seconds * 1000),
      callbackHost: callbackHost(start.url),
    },
    deps.config.SIGNALBOX_DELIVERY_MAX_ATTEMPTS,
    deps.config.SIGNALBOX_DELIVERY_BACKOFF_S,
  );
  deps.log.info({ runId: start.runId, eventId: eventId(start.eventId), status: attempt.status, verdict: attempt.verdict, recorded: recorded !== undefined }, "run start attempt");
  if (recorded?.outcome === "failed") {
    deps.metrics?.deliveriesGivenUp.inc({ reason: attempt.verdict === "retry" ? "attempts_exhausted" : "rejected" });
    deps.log.warn({ runId: start.runId, callbackHost: callbackHost(start.url), attempts: recorded.attempt, lastError: attempt.error }, "run start delivery gave up");
  }
  return recorded?.outcome ?? attempt.verdict;
}

/** The public shape of a run's start (GET /runs/{run}/start). */
export function toStartResource(s: StartRow) {
  return {
    run_id: s.runId,
    signal_id: s.signalId,
    signal: s.signal,
    callback_host: callbackHost(s.url),
    webhook_id: eventId(s.eventId),
    occurred_at: s.occurredAt.toISOString(),
    delivery: { status: s.deliveryStatus, attempts: s.deliveryAttempts, last_error: s.deliveryLastError },
  };
}
export type StartResource = ReturnType<typeof toStartResource>;

export async function getStart(deps: Pick<Deps, "db">, runId: string): Promise<StartResource> {
  const start = await findStart(deps.db, runId);
  if (!start) throw new NotFoundError(`run '${runId}' was not started by a signal`);
  return toStartResource(start);
}

/**
 * Sends the run's start event again, now, in a new round of attempts (as POST /waits/{id}/redeliver
 * does for a callback): after it failed or was delivered, or while a retry is pending. The
 * `webhook-id` stays the same; attempt numbers go on.
 */
export async function redeliverStart(deps: Pick<Deps, "db">, runId: string): Promise<StartResource> {
  return withTransaction(deps.db, async (tx) => {
    if (!(await requeueStart(tx, runId))) throw new NotFoundError(`run '${runId}' was not started by a signal`);
    await addJob(tx, "deliver_start", { id: runId }, { jobKey: jobKeys.start(runId) });
    return toStartResource((await findStart(tx, runId))!);
  });
}
