import type { Command } from "../command.ts";

export const redeliver: Command = {
  name: ["redeliver"],
  summary: "send a wait's resume callback again (after it failed, or now instead of at the next retry)",
  args: "<wait-id>",
  arity: [1, 1],
  options: {},
  help: `Starts a new round of delivery attempts with the same webhook-id; earlier attempts stay
listed. 1 (with the reason) when the wait has no callback or has not left waiting yet.

Options:
  --json   the wait as the API returns it

Example:
  signalbox redeliver wt_01jb2m3k4n5p6q7r8s9t0v1w2x3y`,
  async run({ positionals, json, client, output }) {
    const wait = await client().waits.redeliver(positionals[0]!);
    output.out(json ? JSON.stringify(wait, null, 2) : `${wait.id}: callback to ${wait.callback_url} queued (delivery ${wait.delivery.status}, ${wait.delivery.attempts} attempts so far)`);
  },
};
