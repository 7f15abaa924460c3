import { sql } from "drizzle-orm";
import { newId } from "../core/ids.ts";
import type { Tx } from "../db/client.ts";
import { notifications } from "../db/schema.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";

export interface NotifyPlan {
  waitId: string;
  timeoutAt: Date | null;
  notifyUrl: string | null;
  remindersS: number[];
}

/**
 * A signal type's notify_url hears `signal.waiting` as a wait opens, and `signal.reminder`
 * `reminders_s` seconds before its deadline (reminders already past are skipped). Each is a
 * row delivered by a job enqueued here, in the transaction that opens the wait.
 */
export async function scheduleNotifications(tx: Tx, plan: NotifyPlan): Promise<void> {
  if (!plan.notifyUrl) return;
  const now = Date.now();
  const due = [
    { type: "signal.waiting", at: null as Date | null },
    // The same reminder twice would be one event sent twice.
    ...(plan.timeoutAt ? [...new Set(plan.remindersS)].map((s) => ({ type: "signal.reminder", at: new Date(plan.timeoutAt!.getTime() - s * 1000) })) : []),
  ].filter((n) => n.at === null || n.at.getTime() > now);
  for (const n of due) {
    const id = newId("nt");
    // created_at is the event's occurred_at: a reminder occurs when it falls due, not when the wait opened.
    await tx.insert(notifications).values({ id, waitId: plan.waitId, type: n.type, url: plan.notifyUrl, ...(n.at ? { createdAt: n.at } : {}) });
    await addJob(tx, "deliver_notification", { id }, { jobKey: jobKeys.notify(id), ...(n.at ? { runAt: sql`${n.at.toISOString()}::timestamptz` } : {}) });
  }
}
