// The workflow: deterministic code only (Temporal replays it), so everything that talks to
// signalbox is an activity. It opens the wait through one, then waits for the signal that the
// callback handler sends when signalbox calls back.
import { condition, proxyActivities, setHandler, workflowInfo } from "@temporalio/workflow";
import type * as activities from "./activities.ts";
import { signalboxResumed, type Refund, type SignalboxResumed } from "./shared.ts";

const { openApprovalWait, issueRefund } = proxyActivities<typeof activities>({
  startToCloseTimeout: "1 minute",
  retry: { maximumAttempts: 10 },
});

const APPROVAL_TIMEOUT_S = 2 * 24 * 3600;

export interface RefundOutcome {
  refund: string;
  status: "refunded" | "rejected" | "no answer";
  decision: unknown;
}

export async function refundWorkflow(refund: Refund): Promise<RefundOutcome> {
  // Registered before anything can block, so a signal that arrives early is not missed
  // (Temporal keeps it in the history and replays it into this handler).
  let resumed: SignalboxResumed | undefined;
  setHandler(signalboxResumed, (event) => {
    // Callbacks come at least once: the first one decides, a repeat (same event id, or a late
    // second event) changes nothing.
    resumed ??= event;
  });

  // The workflow id is the run id in signalbox, so the callback handler knows whom to signal.
  await openApprovalWait({ runId: workflowInfo().workflowId, refund, timeoutS: APPROVAL_TIMEOUT_S });

  // signalbox times the wait out itself and says so (signal.timeout): this timer only guards
  // against that callback never arriving.
  const heard = await condition(() => resumed !== undefined, `${APPROVAL_TIMEOUT_S + 3600} seconds`);
  if (!heard || resumed?.type !== "signal.received") return { refund: refund.id, status: "no answer", decision: null };

  const decision = resumed.payload as { approved: boolean };
  if (!decision.approved) return { refund: refund.id, status: "rejected", decision };
  await issueRefund(refund);
  return { refund: refund.id, status: "refunded", decision };
}
