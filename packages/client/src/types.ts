// The resources of the API, named as the OpenAPI document names them. Everything here is derived
// from the generated `paths`/`components` types, so a change to the contract shows up as a type
// error in code that uses this package, not as a surprise at run time.
import type { components, operations } from "./generated/openapi.ts";

type Schemas = components["schemas"];

export type Wait = Schemas["Wait"];
export type WaitStatus = Wait["status"];
export type OpenWait = Schemas["OpenWait"];
export type WaitList = Schemas["WaitList"];
export type SignalType = Schemas["SignalType"];
export type SignalTypeInput = Schemas["SignalTypeInput"];
export type SignalTypeList = Schemas["SignalTypeList"];
export type SignalAccepted = Schemas["SignalAccepted"];
export type SignalRecord = Schemas["SignalRecord"];
/** A signal record with where its reply stands (`GET /signals/{id}`). */
export type SignalWithReply = Schemas["SignalWithReply"];
export type SignalList = Schemas["SignalList"];
export type SignalBatch = Schemas["SignalBatch"];
export type SignalBatchResults = Schemas["SignalBatchResults"];
export type SignalRedriven = Schemas["SignalRedriven"];
export type RedriveResult = Schemas["RedriveResult"];
export type RedriveFilter = NonNullable<Schemas["RedriveRequest"]["filter"]>;
export type Run = Schemas["Run"];
export type RunControl = Schemas["RunControl"];
/** `by` and `reason` of a continue-as-new (the new run is the second argument of `runs.continue`). */
export type RunContinue = Omit<Schemas["RunContinue"], "run_id">;
export type RunEvent = Schemas["RunEvent"];
export type RunEventList = Schemas["RunEventList"];
export type CheckpointAnswer = Schemas["CheckpointAnswer"];
export type DeliveryAttemptList = Schemas["DeliveryAttemptList"];
export type FailingDeliveryList = Schemas["FailingDeliveryList"];
export type RunStart = Schemas["RunStart"];
export type StartDeliveryAttemptList = Schemas["StartDeliveryAttemptList"];
export type ApprovalLinks = Schemas["ApprovalLinks"];
export type CreateApprovalLinks = Schemas["CreateApprovalLinks"];
export type ProblemBody = Schemas["Problem"];
export type IntakeProblemBody = Schemas["IntakeProblem"];
export type ValidationIssue = Schemas["ValidationIssue"];
/** Every answer intake can give: the 2xx outcomes and the rejections. */
export type IntakeOutcome = NonNullable<IntakeProblemBody["outcome"]>;

/** Query parameters of `GET /waits`, plus `metadata` (sent as `metadata.<key>=<value>`, which the document cannot list). */
export type FindWaitsQuery = NonNullable<operations["findWaits"]["parameters"]["query"]> & { metadata?: Record<string, string> };
export type ListSignalsQuery = NonNullable<operations["listSignals"]["parameters"]["query"]>;
export type ListDeliveriesQuery = NonNullable<operations["listFailingDeliveries"]["parameters"]["query"]>;

/**
 * A resume callback: POSTed to a wait's `callback_url` when it leaves `waiting`. `id` is also the
 * `webhook-id` header and stays the same on every retry, so it is the key to deduplicate on.
 */
export interface ResumeEvent {
  id: string;
  type: "signal.received" | "signal.timeout" | "signal.cancelled";
  occurred_at: string;
  wait: Wait;
}

/**
 * A notification: POSTed to a signal type's `notify_url` when a wait for it opens
 * (`signal.waiting`) or its deadline nears (`signal.reminder`). Signed like a resume callback;
 * the wait's `callback_url` is cut to scheme, host and path (no credentials or query).
 */
export interface NotificationEvent {
  id: string;
  type: "signal.waiting" | "signal.reminder";
  occurred_at: string;
  wait: Wait;
}

/**
 * Signal-with-start: POSTed to a signal type's `start.url` when a signal of that type comes for a
 * run signalbox has never seen (its outcome was `started`). Start the run: its first wait of that
 * signal's name receives this signal at once. `id` is the `webhook-id`, the same on every retry.
 */
export type RunStartEvent = Schemas["RunStartEvent"];

/** Whatever signalbox signs and POSTs to an engine. Switch on `type`. */
export type SignalboxEvent = ResumeEvent | NotificationEvent | RunStartEvent;
