// Activities: the side effects. Temporal retries an activity that fails or times out, so each
// must be safe to run twice.
import { log } from "@temporalio/activity";
import { createClient } from "@signalbox/client";
import type { Refund } from "./shared.ts";

const signalbox = createClient({ baseUrl: process.env.SIGNALBOX_URL ?? "http://127.0.0.1:8080", token: process.env.SIGNALBOX_TOKEN });
// Where signalbox reaches callback-handler.ts.
const CALLBACK_URL = process.env.SIGNALBOX_CALLBACK_URL ?? "http://127.0.0.1:9000/signalbox";

/** Opens the approval wait. A retry gets the same wait back: same run, same `key`. */
export async function openApprovalWait(input: { runId: string; refund: Refund; timeoutS: number }): Promise<string> {
  const wait = await signalbox.waits.open(input.runId, {
    signal: "refund-approval",
    key: "approval",
    timeout_s: input.timeoutS,
    callback_url: CALLBACK_URL,
    metadata: { temporal_workflow_id: input.runId, customer: input.refund.customer, amount: String(input.refund.amount) },
  });
  log.info("waiting for approval", { runId: input.runId, waitId: wait.id });
  return wait.id;
}

export async function issueRefund(refund: Refund): Promise<void> {
  log.info("refund issued", { refund: refund.id, amount: refund.amount }); // your payment provider here, with refund.id as its idempotency key
}
