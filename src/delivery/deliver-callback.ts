import { sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import type { Queryable } from "../db/client.ts";
import { eventId } from "../events/events.queries.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { toWaitResource } from "../waits/wait-view.ts";
import { findWaitWithEvent } from "../waits/waits.queries.ts";
import { retryDelayS, type AttemptVerdict } from "./classify-response.ts";
import { postSigned } from "./post-signed.ts";

/**
 * The delivery job: POSTs the wait's resolution event to its callback_url, signed per Standard
 * Webhooks (webhook-id = the event id, the same on every retry), then records the attempt and,
 * when it may still pass, schedules the next one with our own backoff.
 */
export async function deliverCallback(deps: Pick<Deps, "db" | "config" | "secrets" | "log" | "metrics">, waitId: string, abort?: AbortSignal): Promise<AttemptVerdict | "skipped"> {
  const found = await findWaitWithEvent(deps.db, waitId);
  if (!found) return "skipped";
  const { wait, event } = found;
  if (wait.deliveryStatus !== "pending" || !wait.callbackUrl) return "skipped";

  const id = eventId(event.id);
  const body = JSON.stringify({ id, type: event.type, occurred_at: event.occurredAt.toISOString(), wait: toWaitResource(wait) });
  const attempt = await postSigned(wait.callbackUrl, id, body, deps.secrets.callbackSecret, abort);
  deps.metrics?.deliveryLatency.observe(attempt.seconds);
  const final = await recordAttempt(deps, waitId, wait.deliveryAttempts, attempt.verdict, attempt.error);
  deps.metrics?.deliveries.inc({ result: final });
  if (final !== "retry") deps.metrics?.deliveryAttempts.observe(wait.deliveryAttempts + 1);
  deps.log.info({ waitId, eventId: id, status: attempt.status, verdict: attempt.verdict, attempt: wait.deliveryAttempts + 1 }, "callback attempt");
  return attempt.verdict;
}

/** Records the attempt; returns how the delivery stands now (a retryable error past the last attempt is failed). */
async function recordAttempt(deps: Pick<Deps, "db" | "config">, waitId: string, attemptsBefore: number, verdict: AttemptVerdict, error: string | null): Promise<AttemptVerdict> {
  const attempt = attemptsBefore + 1;
  const retry = verdict === "retry" && attempt < deps.config.SIGNALBOX_DELIVERY_MAX_ATTEMPTS;
  const status = verdict === "delivered" ? "delivered" : retry ? "pending" : "failed";
  // Compare-and-set on the attempt count: a concurrent redelivery or duplicate job records nothing twice.
  const record = (q: Queryable) =>
    q.execute(sql`
      update signalbox.waits set delivery_attempts = ${attempt}::int, delivery_status = ${status}::text, delivery_last_error = ${error}::text
      where id = ${waitId}::text and delivery_status = 'pending' and delivery_attempts = ${attemptsBefore}::int
      returning id`);
  if (!retry) {
    await record(deps.db); // one statement, no transaction needed: the common case
  } else {
    await withTransaction(deps.db, async (tx) => {
      if ((await record(tx)).length === 0) return;
      const delayS = retryDelayS(deps.config.SIGNALBOX_DELIVERY_BACKOFF_S, attempt);
      await addJob(tx, "deliver_callback", { id: waitId }, { runAt: sql`now() + ${delayS}::double precision * interval '1 second'`, jobKey: jobKeys.deliver(waitId) });
    });
  }
  return status === "pending" ? "retry" : status;
}
