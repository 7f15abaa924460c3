import type { Command } from "../command.ts";

export const redeliver: Command = {
  name: ["redeliver"],
  summary: "send a wait's resume callback (or, with --start, a run's run.start event) again",
  args: "<wait-id> | --start <run-id>",
  arity: [1, 1],
  options: { start: { type: "boolean" } },
  help: `Starts a new round of delivery attempts with the same webhook-id; earlier attempts stay
listed. 1 (with the reason) when the wait has no callback or has not left waiting yet, or, with
--start, when no signal started that run.

Options:
  --start  the argument is a run id: send its run.start event again (signal-with-start)
  --json   the wait (or the run's start) as the API returns it

Examples:
  signalbox redeliver wt_01jb2m3k4n5p6q7r8s9t0v1w2x3y
  signalbox redeliver --start order-18`,
  async run({ positionals, values, json, client, output }) {
    if (values.start) {
      const start = await client().runs.redeliverStart(positionals[0]!);
      output.out(json ? JSON.stringify(start, null, 2) : `${start.run_id}: run.start to ${start.callback_host} queued (delivery ${start.delivery.status}, ${start.delivery.attempts} attempts so far)`);
      return;
    }
    const wait = await client().waits.redeliver(positionals[0]!);
    output.out(json ? JSON.stringify(wait, null, 2) : `${wait.id}: callback to ${wait.callback_url} queued (delivery ${wait.delivery.status}, ${wait.delivery.attempts} attempts so far)`);
  },
};
