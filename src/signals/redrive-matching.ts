import { NotFoundError, ServiceError } from "../core/errors.ts";
import { databaseNow, countPayloadNotKept, listRedriveCandidates, type RedriveMatch, type RedrivePosition } from "./redrive.queries.ts";
import { redriveSignal, REDRIVABLE_OUTCOMES, type RedrivableOutcome, type RedriveDeps } from "./redrive-signal.ts";
import type { Outcome } from "./signal-outcome.ts";

export interface RedriveFilter {
  /** Unset: rejected_not_waiting and expired (a payload that broke the schema only when asked). */
  outcome?: RedrivableOutcome;
  signal?: string;
  runId?: string;
  /** RFC 3339. */
  before?: string;
}

export interface RedriveSummary {
  /** Dead letters sent again. */
  redriven: number;
  /** The intake outcomes of the new attempts. */
  outcomes: Partial<Record<Outcome, number>>;
  /** Matches not sent: payload not kept, or redriven meanwhile by another request. */
  skipped: { payload_not_kept: number; already_redriven: number };
  /** True when the request stopped at its cap with matches left: send it again. */
  more: boolean;
}

const PAGE = 100;
/** Dead letters one request redrives at most (about a second per few hundred on a small machine). */
export const REDRIVE_CAP = 10_000;

/**
 * Redrives every dead letter that matches, oldest first and one at a time, so signals for one run
 * are sent again in the order they first came. Only records received before the request began
 * (or before `before`, if earlier) are taken: the records this request makes can never match it,
 * so it ends.
 */
export async function redriveMatching(deps: RedriveDeps, filter: RedriveFilter, cap = REDRIVE_CAP): Promise<RedriveSummary> {
  const match: RedriveMatch = {
    outcomes: filter.outcome ? [filter.outcome] : REDRIVABLE_OUTCOMES.filter((o) => o !== "rejected_invalid_payload"),
    ...(filter.signal !== undefined ? { signal: filter.signal } : {}),
    ...(filter.runId !== undefined ? { runId: filter.runId } : {}),
    ...(filter.before !== undefined ? { before: filter.before } : {}),
    until: await databaseNow(deps.db),
  };
  const summary: RedriveSummary = { redriven: 0, outcomes: {}, skipped: { payload_not_kept: await countPayloadNotKept(deps.db, match), already_redriven: 0 }, more: false };
  let after: RedrivePosition | undefined;
  let taken = 0;
  for (;;) {
    const page = await listRedriveCandidates(deps.db, match, after, PAGE);
    for (const candidate of page) {
      if (taken === cap) return { ...summary, more: true };
      taken++;
      after = candidate;
      try {
        const answer = await redriveSignal(deps, candidate.id);
        summary.redriven++;
        summary.outcomes[answer.outcome] = (summary.outcomes[answer.outcome] ?? 0) + 1;
      } catch (err) {
        // Another request redrove it between the page and here: theirs stands.
        if (err instanceof ServiceError && err.title === "already_redriven") summary.skipped.already_redriven++;
        // Retention removed it between the page and here (the oldest go first): nothing to send.
        else if (!(err instanceof NotFoundError)) throw err;
      }
    }
    if (page.length < PAGE) return summary;
  }
}
