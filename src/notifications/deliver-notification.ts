import { eq, sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { notifications } from "../db/schema.ts";
import { callbackHost } from "../delivery/callback-host.ts";
import { retryDelayS } from "../delivery/classify-response.ts";
import type { DeliveryEngine } from "../delivery/delivery-engine.ts";
import { ATTEMPT_TIMEOUT_MS, postSigned, type AttemptResult } from "../delivery/post-signed.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { toWaitResource } from "../waits/wait-view.ts";
import { findWait } from "../waits/waits.queries.ts";

type NotificationDeps = Pick<Deps, "db" | "config" | "secrets" | "log"> & Partial<Pick<Deps, "metrics">>;

/**
 * Delivers one `signal.waiting` / `signal.reminder` event to the signal type's notify_url,
 * signed and retried like callbacks. Nothing is sent for a wait that is no longer waiting.
 * With the delivery engine (the worker's), it goes through the endpoint gate as callbacks do:
 * an endpoint backed off or stuck turns it away for later, and the job lets go of a request
 * unanswered after a second (a job due after the limit keeps it owed; the answer is recorded
 * when it comes), so a hung notify_url holds no job slot for the 10 s limit.
 */
export async function deliverNotification(deps: NotificationDeps, id: string, abort?: AbortSignal, engine?: Pick<DeliveryEngine, "sendOne">): Promise<string> {
  const [n] = await deps.db.select().from(notifications).where(eq(notifications.id, id));
  if (!n || n.status !== "pending") return "skipped";
  const wait = await findWait(deps.db, n.waitId);
  if (!wait || wait.status !== "waiting") {
    await deps.db.update(notifications).set({ status: "skipped" }).where(eq(notifications.id, id));
    return "skipped";
  }
  const body = JSON.stringify({ id, type: n.type, occurred_at: n.createdAt.toISOString(), wait: withoutCallbackCredentials(toWaitResource(wait)) });
  const send = (signal?: AbortSignal) => postSigned(n.url, id, body, deps.secrets.callbackSecret, signal);
  if (!engine) return recordAttempt(deps, n, await send(abort));
  let status = "deferred";
  await engine.sendOne(
    {
      host: callbackHost(n.url),
      job: { task: "deliver_notification", id, jobKey: jobKeys.notify(id) },
      limitMs: ATTEMPT_TIMEOUT_MS,
      send,
      failed: (attempt) => attempt.verdict === "retry",
      abandoned: (attempt) => attempt.abandoned === true,
      settle: async (attempt) => void (status = await recordAttempt(deps, n, attempt)),
    },
    abort,
  );
  return status;
}

/** Records an attempt (a compare-and-set on the attempt count) and schedules the next when it may still pass. */
async function recordAttempt(deps: NotificationDeps, n: typeof notifications.$inferSelect, attempt: AttemptResult): Promise<string> {
  const id = n.id;
  const attempts = n.attempts + 1;
  const retry = attempt.verdict === "retry" && attempts < deps.config.SIGNALBOX_DELIVERY_MAX_ATTEMPTS;
  const status = attempt.verdict === "delivered" ? "delivered" : retry ? "pending" : "failed";
  const recorded = await withTransaction(deps.db, async (tx) => {
    const rows = await tx.execute(sql`
      update signalbox.notifications set attempts = ${attempts}::int, status = ${status}::text, last_error = ${attempt.error}::text
      where id = ${id}::text and status = 'pending' and attempts = ${n.attempts}::int returning id`);
    if (rows.length === 1 && retry) {
      const delayS = retryDelayS(deps.config.SIGNALBOX_DELIVERY_BACKOFF_S, attempts);
      await addJob(tx, "deliver_notification", { id }, { runAt: sql`now() + ${delayS}::double precision * interval '1 second'`, jobKey: jobKeys.notify(id) });
    }
    return rows.length === 1;
  });
  deps.log.info({ notification: id, type: n.type, status: attempt.status, verdict: attempt.verdict }, "notification attempt");
  if (recorded && status === "failed") {
    // Once per notification that gives up (the compare-and-set above won), as for callbacks:
    // the host only, never the URL's credentials, path or query.
    const reason = attempt.verdict === "retry" ? "attempts_exhausted" : "rejected";
    deps.metrics?.notificationsGivenUp.inc({ reason });
    deps.log.warn({ notification: id, waitId: n.waitId, notifyHost: callbackHost(n.url), attempts, lastError: attempt.error, reason }, "notification delivery gave up");
  }
  return status;
}

/**
 * The notify_url receiver (a chat bot, an inbox) is not the engine: it learns where the wait
 * calls back, never the credentials or tokens the engine put in that URL (user:pass@, query,
 * fragment).
 */
export function withoutCallbackCredentials<W extends { callback_url: string | null }>(wait: W): W {
  if (!wait.callback_url) return wait;
  const url = new URL(wait.callback_url);
  return { ...wait, callback_url: `${url.protocol}//${url.host}${url.pathname}` };
}
