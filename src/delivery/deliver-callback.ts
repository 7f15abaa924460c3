import { sql } from "drizzle-orm";
import { retryingRollbacks } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { jobIdArray } from "../jobs/enqueue.ts";
import { eventId } from "../events/events.queries.ts";
import { toWaitResource, type WaitRow } from "../waits/wait-view.ts";
import { findWaitWithEvent } from "../waits/waits.queries.ts";
import type { AttemptVerdict } from "./classify-response.ts";
import { callbackHost } from "./callback-host.ts";
import { postSigned, type AttemptResult } from "./post-signed.ts";

export type DeliveryDeps = Pick<Deps, "db" | "config" | "secrets" | "log" | "metrics">;

/** A callback owed now: the wait (pending delivery), its signed body and endpoint. */
export interface OwedCallback {
  waitId: string;
  url: string;
  /** host[:port] only (never credentials, path or query). */
  host: string;
  /** The event id: the `webhook-id` of every attempt. */
  webhookId: string;
  body: string;
  /** The wait's delivery_attempts when this attempt began (the compare-and-set of its record). */
  attemptsBefore: number;
  /** The wait's delivery_round then: an attempt a redelivery overtook is an earlier round's (signalbox.sent_in_earlier_round). */
  roundBefore: number;
}

/** The callback a wait owes, if it owes one now (delivery pending, a callback_url). */
export function owedCallback(found: { wait: WaitRow; event: { id: number; type: string; occurredAt: Date } }): OwedCallback | undefined {
  const { wait, event } = found;
  if (wait.deliveryStatus !== "pending" || !wait.callbackUrl) return undefined;
  const webhookId = eventId(event.id);
  return {
    waitId: wait.id,
    url: wait.callbackUrl,
    host: callbackHost(wait.callbackUrl),
    webhookId,
    body: JSON.stringify({ id: webhookId, type: event.type, occurred_at: event.occurredAt.toISOString(), wait: toWaitResource(wait) }),
    attemptsBefore: wait.deliveryAttempts,
    roundBefore: wait.deliveryRound,
  };
}

/**
 * One attempt, alone: POSTs the wait's resolution event to its callback_url, signed per Standard
 * Webhooks (webhook-id = the event id, the same on every retry), then records the attempt and,
 * when it may still pass, schedules the next one with our own backoff (one statement:
 * db/functions/record_delivery_attempt.sql). The worker goes through the delivery engine
 * (delivery-engine.ts), which does the same for batches, per endpoint.
 */
export async function deliverCallback(deps: DeliveryDeps, waitId: string, abort?: AbortSignal): Promise<AttemptVerdict | "skipped"> {
  const found = await findWaitWithEvent(deps.db, waitId);
  const owed = found && owedCallback(found);
  if (!owed) return "skipped";
  const attempt = await postSigned(owed.url, owed.webhookId, owed.body, deps.secrets.callbackSecret, abort, true);
  await reportAttempt(deps, owed, attempt);
  return attempt.verdict;
}

/** Records an attempt (sent, or refused without sending) and reports it: metrics, the log, the give-up warning. */
export async function reportAttempt(deps: DeliveryDeps, owed: OwedCallback, attempt: AttemptResult): Promise<void> {
  const [recorded] = await recordAttempts(deps, [{ owed, attempt }]);
  reportRecorded(deps, owed, attempt, recorded);
}

export function reportRecorded(deps: DeliveryDeps, owed: OwedCallback, attempt: AttemptResult, recorded: Recorded | undefined): void {
  const { waitId } = owed;
  if (attempt.status !== undefined || attempt.seconds > 0) deps.metrics?.deliveryLatency.observe(attempt.seconds);
  if (deps.log.isLevelEnabled("info")) {
    deps.log.info({ waitId, eventId: owed.webhookId, status: attempt.status, verdict: attempt.verdict, attempt: owed.attemptsBefore + 1, recorded: recorded !== undefined }, "callback attempt");
  }
  if (attempt.verdict === "delivered" && attempt.error !== null && deps.log.isLevelEnabled("debug")) {
    deps.log.debug({ waitId, eventId: owed.webhookId, note: attempt.error }, "callback delivered; its reply was not stored");
  }
  if (!recorded) return; // a concurrent send of the same attempt was recorded instead
  deps.metrics?.deliveries.inc({ result: recorded.outcome });
  if (recorded.outcome !== "retry") deps.metrics?.deliveryAttempts.observe(recorded.roundAttempt);
  if (recorded.outcome === "failed") {
    const reason = attempt.verdict === "retry" ? "attempts_exhausted" : "rejected";
    deps.metrics?.deliveriesGivenUp.inc({ reason });
    // Once per delivery that gives up (the compare-and-set above won): the host only, since a
    // callback URL may carry credentials or tokens in its userinfo, path or query.
    deps.log.warn({ waitId, callbackHost: owed.host, attempts: recorded.attempt, lastError: attempt.error, reason }, "callback delivery gave up");
  }
}

export interface Recorded {
  outcome: AttemptVerdict;
  /** The attempt's number for this wait, across redeliveries. */
  attempt: number;
  /** Its number within the current round (a redelivery starts a round). */
  roundAttempt: number;
}

/**
 * Records attempts, in one statement; for each, undefined when the compare-and-set lost (this
 * attempt number was recorded by another send). An item's `completesJob` (a callback job this
 * process ran itself, which the attempt settles) is completed in the same transaction.
 */
export async function recordAttempts(
  deps: Pick<Deps, "db" | "config">,
  items: Array<{ owed: OwedCallback; attempt: AttemptResult; completesJob?: string }>,
): Promise<Array<Recorded | undefined>> {
  if (items.length === 0) return [];
  const json = JSON.stringify(
    items.map(({ owed, attempt }) => ({
      wait_id: owed.waitId,
      attempts_before: owed.attemptsBefore,
      round_before: owed.roundBefore,
      verdict: attempt.verdict,
      status_code: attempt.status ?? null,
      error: attempt.error,
      duration_ms: Math.round(attempt.seconds * 1000),
      // The database's clock dates it (now() minus this), as every other time it keeps.
      sent_ms_ago: attempt.sentAt === undefined ? null : Math.round(performance.now() - attempt.sentAt),
      callback_host: owed.host,
      reply: attempt.verdict === "delivered" ? (attempt.reply ?? null) : null,
    })),
  );
  const jobs = items.flatMap((i) => (i.completesJob === undefined ? [] : [i.completesJob]));
  const completes = jobs.length === 0 ? sql`null::bigint[]` : jobIdArray(jobs);
  const rows = await retryingRollbacks(() =>
    deps.db.execute<{ n: number; outcome: AttemptVerdict; attempt: number; round_attempt: number }>(sql`
      select n, outcome, attempt, round_attempt from signalbox.record_delivery_attempts(
        ${json}::json, ${deps.config.SIGNALBOX_DELIVERY_MAX_ATTEMPTS}::int, ${deps.config.SIGNALBOX_DELIVERY_BACKOFF_S}::double precision, ${completes})`),
  );
  const out: Array<Recorded | undefined> = items.map(() => undefined);
  for (const r of rows) out[Number(r.n) - 1] = { outcome: r.outcome, attempt: Number(r.attempt), roundAttempt: Number(r.round_attempt) };
  return out;
}
