import type { ValidationIssue } from "../core/errors.ts";

export const OUTCOMES = [
  "received",
  "buffered",
  "started",
  "duplicate",
  "rejected_idempotency_conflict",
  "rejected_unauthenticated",
  "rejected_unknown_signal",
  "rejected_not_waiting",
  "rejected_not_active",
  "rejected_invalid_payload",
  "payload_too_large",
  "invalid_json",
] as const;
export type Outcome = (typeof OUTCOMES)[number];

/**
 * What a signal record may show: every intake outcome, and `expired`, a buffered signal whose
 * TTL passed before any wait took it (shown so from that instant; the retention job stores it).
 */
export const RECORD_OUTCOMES = [...OUTCOMES, "expired"] as const;
export type RecordOutcome = (typeof RECORD_OUTCOMES)[number];

/** The HTTP status of each intake outcome (API.md, "Signals: intake"). */
export const OUTCOME_STATUS: Record<Outcome, number> = {
  received: 202,
  buffered: 202,
  started: 202,
  duplicate: 200,
  rejected_idempotency_conflict: 409,
  rejected_unauthenticated: 401,
  rejected_unknown_signal: 404,
  rejected_not_waiting: 409,
  rejected_not_active: 409,
  rejected_invalid_payload: 422,
  payload_too_large: 413,
  invalid_json: 400,
};

/** The outcomes of an accepted signal (2xx, with a sequence). */
export type AcceptedOutcome = "received" | "buffered" | "started" | "duplicate";

/**
 * What intake answers: an accepted outcome with ids, or a rejection with its reason. `run_id` is
 * the run the signal was applied to (the newest of its chain when the run addressed was
 * continued); a rejection recorded in a signal log names the run whose log holds it.
 */
export type IntakeAnswer =
  | { outcome: AcceptedOutcome; signal_id: string; sequence: number; wait_id: string | null; run_id: string }
  | { outcome: Exclude<Outcome, AcceptedOutcome>; detail: string; signal_id?: string; run_id?: string; validation_errors?: ValidationIssue[] };
