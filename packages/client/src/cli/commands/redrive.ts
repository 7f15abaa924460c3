import { stringFlag, type Command } from "../command.ts";
import { UsageError } from "../exit-codes.ts";
import { fields } from "../output.ts";
import type { RedriveFilter } from "../../types.ts";

const OUTCOMES = ["rejected_not_waiting", "expired", "rejected_invalid_payload"] as const;

export const redrive: Command = {
  name: ["redrive"],
  summary: "send a dead letter again (one signal by id, or every match of --signal/--run/--outcome/--before)",
  args: "[<signal-id>]",
  arity: [0, 1],
  options: {
    signal: { type: "string" },
    run: { type: "string" },
    outcome: { type: "string" },
    before: { type: "string" },
  },
  help: `With a signal id, sends that rejected or expired signal's payload again to its run and
signal name and prints the new attempt's outcome; a signal is redriven at most once. Without
one, redrives every dead letter matching the filter options (at least one) and prints counts.

Options:
  --signal NAME      only signals of this name
  --run RUN          only signals to this run
  --outcome OUTCOME  rejected_not_waiting, expired or rejected_invalid_payload
                     (default: rejected_not_waiting and expired)
  --before TIME      only signals received before this RFC 3339 time
  --json             the API's answer as JSON

Exits 0 when the new attempt is received, buffered, started or a duplicate (or, with a filter, when the
request was done); 1 when it is refused (rejected again: the outcome is printed; or
already_redriven, not_redrivable, payload_not_kept).

Examples:
  signalbox redrive sg_01jb2m3k4n5p6q7r8s9t0v1w2x3y
  signalbox redrive --signal manager-approval --outcome rejected_not_waiting`,
  async run({ positionals, values, json, client, output }) {
    const filter = filterOf(values);
    const [id] = positionals;
    if (id !== undefined && filter) throw new UsageError("give a signal id or filter options, not both");
    if (id === undefined && !filter) throw new UsageError("give a signal id, or at least one of --signal, --run, --outcome, --before");
    if (id !== undefined) {
      const answer = await client().signals.redrive(id);
      if (json) return output.out(JSON.stringify(answer, null, 2));
      output.out(
        fields([
          ["outcome", answer.outcome],
          ["signal", answer.signal_id],
          ["sequence", String(answer.sequence)],
          ["wait", answer.wait_id ?? "- (kept until a wait for it opens)"],
          ["redriven from", answer.redriven_from],
        ]),
      );
      return;
    }
    const result = await client().signals.redriveMatching(filter!);
    if (json) return output.out(JSON.stringify(result, null, 2));
    const byOutcome = Object.entries(result.outcomes).map(([outcome, n]) => [`  ${outcome}`, String(n)] as [string, string]);
    output.out(
      fields([
        ["redriven", String(result.redriven)],
        ...byOutcome,
        ["skipped: payload not kept", String(result.skipped.payload_not_kept)],
        ["skipped: already redriven", String(result.skipped.already_redriven)],
        ...(result.more ? [["more", "yes: run the same command again"] as [string, string]] : []),
      ]),
    );
  },
};

function filterOf(values: Parameters<Command["run"]>[0]["values"]): RedriveFilter | undefined {
  const outcome = stringFlag(values, "outcome");
  if (outcome !== undefined && !(OUTCOMES as readonly string[]).includes(outcome)) throw new UsageError(`--outcome must be one of ${OUTCOMES.join(", ")}`);
  const filter: RedriveFilter = {};
  for (const key of ["signal", "run", "before"] as const) {
    const v = stringFlag(values, key);
    if (v !== undefined) filter[key] = v;
  }
  if (outcome !== undefined) filter.outcome = outcome as RedriveFilter["outcome"];
  return Object.keys(filter).length > 0 ? filter : undefined;
}
