// What the workflow, its activities, the worker and the callback handler agree on.
import { defineSignal } from "@temporalio/workflow";

export const TASK_QUEUE = "refunds";

export interface Refund {
  id: string;
  customer: string;
  amount: number;
}

/** A signalbox callback, as the workflow hears it: the event id (to ignore a repeat), its type, the signal's payload. */
export interface SignalboxResumed {
  eventId: string;
  type: "signal.received" | "signal.timeout" | "signal.cancelled";
  payload: unknown;
}

/** The Temporal signal the callback handler sends; defining it here keeps both ends typed alike. */
export const signalboxResumed = defineSignal<[SignalboxResumed]>("signalboxResumed");
