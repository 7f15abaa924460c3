import type { FindWaitsQuery, WaitStatus } from "../../types.ts";
import { listFlag, stringFlag, type Command } from "../command.ts";
import { UsageError } from "../exit-codes.ts";
import { listItems } from "../listing.ts";
import { compact, table, when } from "../output.ts";
import { parseInstant, parseLimit } from "../parse.ts";

const STATUSES = ["waiting", "received", "timed_out", "cancelled"] as const;
const DELIVERIES = ["none", "pending", "delivered", "failed"] as const;

export const waitsLs: Command = {
  name: ["waits", "ls"],
  summary: "list waits: what is pending, for whom, until when",
  args: "",
  arity: [0, 0],
  options: {
    status: { type: "string" },
    signal: { type: "string" },
    run: { type: "string" },
    metadata: { type: "string", multiple: true },
    "due-before": { type: "string" },
    "created-before": { type: "string" },
    delivery: { type: "string" },
    limit: { type: "string" },
    all: { type: "boolean" },
  },
  help: `Options:
  --status S           waiting (default), received, timed_out, cancelled, or any
  --signal NAME        only waits for this signal
  --run RUN            only this run's waits
  --metadata K=V       only waits whose metadata has K equal to V (repeat for several)
  --due-before T       only waits timing out before T: an RFC 3339 time, or a span from now (30m, 2h, 1d)
  --created-before T   only waits opened before T (same forms, a span meaning that long ago)
  --delivery S         only waits whose callback delivery is none, pending, delivered or failed
  --limit N            at most N waits (default 50); --all for every page
  --json               the waits as a JSON array

Examples:
  signalbox waits ls --signal manager-approval --metadata assignee=kim
  signalbox waits ls --due-before 1h --json | jq -r '.[].id'`,
  async run({ values, json, client, output }) {
    const status = stringFlag(values, "status") ?? "waiting";
    if (status !== "any" && !STATUSES.includes(status as WaitStatus)) throw new UsageError(`--status must be one of ${STATUSES.join(", ")} or any`);
    const delivery = stringFlag(values, "delivery");
    if (delivery !== undefined && !DELIVERIES.includes(delivery as (typeof DELIVERIES)[number])) throw new UsageError(`--delivery must be one of ${DELIVERIES.join(", ")}`);
    const metadata: Record<string, string> = {};
    for (const pair of listFlag(values, "metadata")) {
      const eq = pair.indexOf("=");
      if (eq <= 0) throw new UsageError(`--metadata takes KEY=VALUE, not "${pair}"`);
      metadata[pair.slice(0, eq)] = pair.slice(eq + 1);
    }
    const limit = parseLimit(stringFlag(values, "limit"));
    const dueBefore = stringFlag(values, "due-before");
    const createdBefore = stringFlag(values, "created-before");
    const query: FindWaitsQuery = {
      ...(status !== "any" ? { status: status as WaitStatus } : {}),
      ...(stringFlag(values, "signal") ? { signal: stringFlag(values, "signal") } : {}),
      ...(stringFlag(values, "run") ? { run_id: stringFlag(values, "run") } : {}),
      ...(delivery ? { delivery: delivery as (typeof DELIVERIES)[number] } : {}),
      ...(dueBefore ? { deadline_before: parseInstant(dueBefore, "--due-before", +1) } : {}),
      ...(createdBefore ? { created_before: parseInstant(createdBefore, "--created-before", -1) } : {}),
      metadata,
    };

    const { items: waits, more } = await listItems((pageLimit, cursor) => client().waits.find({ ...query, limit: pageLimit, ...(cursor ? { cursor } : {}) }), values.all === true, limit);

    if (json) output.out(JSON.stringify(waits, null, 2));
    else if (waits.length === 0) output.err("no waits match");
    else {
      output.out(
        table(
          ["id", "run", "signal", "status", "created", "deadline", "delivery", "metadata"],
          waits.map((w) => [w.id, w.run_id, w.signal, w.status, when(w.created_at), when(w.timeout_at), w.delivery.status, compact(w.metadata, 50)]),
        ),
      );
    }
    if (more) output.err(`more waits match: --limit N for more, or --all`);
  },
};
