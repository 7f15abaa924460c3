import type { Wait } from "../../types.ts";
import type { Command } from "../command.ts";
import { compact, fields, when } from "../output.ts";

export const waitsShow: Command = {
  name: ["waits", "show"],
  summary: "one wait in full: its state, deadline, result and callback delivery",
  args: "<wait-id>",
  arity: [1, 1],
  options: {},
  help: `Options:
  --json    the wait as the API returns it

Example:
  signalbox waits show wt_01jb2m3k4n5p6q7r8s9t0v1w2x3y`,
  async run({ positionals, json, client, output }) {
    const wait = await client().waits.get(positionals[0]!);
    output.out(json ? JSON.stringify(wait, null, 2) : describeWait(wait));
  },
};

export function describeWait(w: Wait): string {
  const d = w.delivery;
  const rows: Array<[string, string]> = [
    ["id", w.id],
    ["run", w.run_id],
    ["signal", w.signal],
    ["key", w.key ?? "-"],
    ["kind", w.kind],
    ["status", w.status],
    ["created", when(w.created_at)],
    ["deadline", when(w.timeout_at)],
    ["resolved", when(w.resolved_at)],
    ["metadata", compact(w.metadata, 200)],
    ["callback", w.callback_url ?? "-"],
    ["delivery", `${d.status}${d.attempts ? ` after ${d.attempts} attempt${d.attempts === 1 ? "" : "s"}` : ""}${d.last_error ? ` (last error: ${d.last_error})` : ""}`],
  ];
  if (w.fires_at) rows.push(["fires", when(w.fires_at)]);
  if (w.parent_wait_id) rows.push(["parent", w.parent_wait_id]);
  if (w.votes && Object.keys(w.votes).length > 0) rows.push(["votes", compact(w.votes, 200)]);
  if (w.result) {
    rows.push(["signal id", `${w.result.signal_id} (#${w.result.sequence} of the run), received ${when(w.result.received_at)}`]);
    rows.push(["payload", compact(w.result.payload, 400)]);
  }
  return fields(rows);
}
