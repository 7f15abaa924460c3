import type { ListDeliveriesQuery } from "../../types.ts";
import { stringFlag, type Command } from "../command.ts";
import { UsageError } from "../exit-codes.ts";
import { listItems } from "../listing.ts";
import { table, when } from "../output.ts";
import { parseLimit } from "../parse.ts";

export const deliveriesLs: Command = {
  name: ["deliveries", "ls"],
  summary: "callbacks and run starts failing now: given up (failed) or retrying (pending)",
  args: "",
  arity: [0, 0],
  options: {
    failed: { type: "boolean" },
    pending: { type: "boolean" },
    host: { type: "string" },
    limit: { type: "string" },
    all: { type: "boolean" },
  },
  help: `Options:
  --failed      only deliveries that gave up (redeliver them with signalbox redeliver)
  --pending     only deliveries waiting for their next retry
  --host HOST   only callbacks to this host[:port]
  --limit N     at most N (default 50); --all for every page
  --json        the deliveries as a JSON array

Example:
  signalbox deliveries ls --failed --json | jq -r '.[].wait_id' | xargs -n1 signalbox redeliver`,
  async run({ values, json, client, output }) {
    if (values.failed && values.pending) throw new UsageError("--failed and --pending exclude each other (neither lists both)");
    const host = stringFlag(values, "host");
    const query: ListDeliveriesQuery = {
      ...(values.failed ? { status: "failed" as const } : values.pending ? { status: "pending" as const } : {}),
      ...(host ? { callback_host: host } : {}),
    };
    const limit = parseLimit(stringFlag(values, "limit"));
    const { items, more } = await listItems((pageLimit, cursor) => client().deliveries.list({ ...query, limit: pageLimit, ...(cursor ? { cursor } : {}) }), values.all === true, limit);
    if (json) output.out(JSON.stringify(items, null, 2));
    else if (items.length === 0) output.err("no failing deliveries");
    else {
      output.out(
        table(
          ["wait", "run", "signal", "status", "attempts", "last attempt", "host", "last error"],
          // A run start (signal-with-start) has no wait: `signalbox` shows it as "start".
          items.map((d) => [d.wait_id ?? "start", d.run_id, d.signal, d.status, String(d.attempts), when(d.last_attempt_at), d.callback_host, d.last_error ?? "-"]),
        ),
      );
    }
    if (more) output.err("more deliveries match: --limit N for more, or --all");
  },
};
