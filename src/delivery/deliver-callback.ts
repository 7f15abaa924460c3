import { sql } from "drizzle-orm";
import { retryingRollbacks } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { eventId } from "../events/events.queries.ts";
import { toWaitResource } from "../waits/wait-view.ts";
import { findWaitWithEvent } from "../waits/waits.queries.ts";
import type { AttemptVerdict } from "./classify-response.ts";
import { callbackHost } from "./callback-host.ts";
import { postSigned, type AttemptResult } from "./post-signed.ts";

type DeliveryDeps = Pick<Deps, "db" | "config" | "secrets" | "log" | "metrics">;

/**
 * The delivery job: POSTs the wait's resolution event to its callback_url, signed per Standard
 * Webhooks (webhook-id = the event id, the same on every retry), then records the attempt and,
 * when it may still pass, schedules the next one with our own backoff (one statement:
 * db/functions/record_delivery_attempt.sql).
 */
export async function deliverCallback(deps: DeliveryDeps, waitId: string, abort?: AbortSignal): Promise<AttemptVerdict | "skipped"> {
  const found = await findWaitWithEvent(deps.db, waitId);
  if (!found) return "skipped";
  const { wait, event } = found;
  if (wait.deliveryStatus !== "pending" || !wait.callbackUrl) return "skipped";

  const id = eventId(event.id);
  const body = JSON.stringify({ id, type: event.type, occurred_at: event.occurredAt.toISOString(), wait: toWaitResource(wait) });
  const attempt = await postSigned(wait.callbackUrl, id, body, deps.secrets.callbackSecret, abort);
  deps.metrics?.deliveryLatency.observe(attempt.seconds);
  const host = callbackHost(wait.callbackUrl);
  const recorded = await recordAttempt(deps, waitId, wait.deliveryAttempts, attempt, host);
  deps.log.info({ waitId, eventId: id, status: attempt.status, verdict: attempt.verdict, attempt: wait.deliveryAttempts + 1, recorded: recorded !== undefined }, "callback attempt");
  if (!recorded) return attempt.verdict; // a concurrent send of the same attempt was recorded instead
  deps.metrics?.deliveries.inc({ result: recorded.outcome });
  if (recorded.outcome !== "retry") deps.metrics?.deliveryAttempts.observe(recorded.roundAttempt);
  if (recorded.outcome === "failed") {
    const reason = attempt.verdict === "retry" ? "attempts_exhausted" : "rejected";
    deps.metrics?.deliveriesGivenUp.inc({ reason });
    // Once per delivery that gives up (the compare-and-set above won): the host only, since a
    // callback URL may carry credentials or tokens in its userinfo, path or query.
    deps.log.warn({ waitId, callbackHost: host, attempts: recorded.attempt, lastError: attempt.error, reason }, "callback delivery gave up");
  }
  return attempt.verdict;
}

interface Recorded {
  outcome: AttemptVerdict;
  /** The attempt's number for this wait, across redeliveries. */
  attempt: number;
  /** Its number within the current round (a redelivery starts a round). */
  roundAttempt: number;
}

/** Records the attempt; undefined when the compare-and-set lost (this attempt number was recorded by another send). */
async function recordAttempt(deps: Pick<Deps, "db" | "config">, waitId: string, attemptsBefore: number, attempt: AttemptResult, host: string): Promise<Recorded | undefined> {
  const rows = await retryingRollbacks(() =>
    deps.db.execute<{ outcome: AttemptVerdict; attempt: number; round_attempt: number }>(sql`
      select outcome, attempt, round_attempt from signalbox.record_delivery_attempt(
        ${waitId}::text, ${attemptsBefore}::int, ${attempt.verdict}::text, ${attempt.status ?? null}::int, ${attempt.error}::text,
        ${Math.round(attempt.seconds * 1000)}::int, ${host}::text,
        ${deps.config.SIGNALBOX_DELIVERY_MAX_ATTEMPTS}::int, ${deps.config.SIGNALBOX_DELIVERY_BACKOFF_S}::double precision)`),
  );
  const row = rows[0];
  return row && { outcome: row.outcome, attempt: Number(row.attempt), roundAttempt: Number(row.round_attempt) };
}
