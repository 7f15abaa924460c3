import type { RunEvent } from "../../types.ts";
import { stringFlag, type Command } from "../command.ts";
import { compact } from "../output.ts";

export const tail: Command = {
  name: ["tail"],
  summary: "follow a run's history live: waits opened, signals, timeouts, pauses",
  args: "<run>",
  arity: [1, 1],
  untilStopped: true,
  options: {
    after: { type: "string" },
  },
  help: `Prints the run's history, then each new event as it happens, until Ctrl-C (exit 0).
Reconnects by itself if the stream drops, or sends nothing (not even a heartbeat) for 45 s,
without missing or repeating an event.

Options:
  --after EVENT-ID   start after this event instead of at the beginning
  --json             one JSON event per line (NDJSON)

Example:
  signalbox tail order-17`,
  async run({ positionals, values, json, client, output, signal }) {
    const after = stringFlag(values, "after");
    for await (const event of client().runs.follow(positionals[0]!, { ...(after ? { after } : {}), signal })) {
      output.out(json ? JSON.stringify(event) : describeEvent(event));
    }
  },
};

function describeEvent(e: RunEvent): string {
  const at = e.occurred_at.replace(/\.\d{3}Z$/, "Z");
  const refs = [e.wait_id ? `wait ${e.wait_id}` : "", e.signal_id ? `signal ${e.signal_id}` : ""].filter(Boolean).join(" ");
  const data = Object.keys(e.data).length > 0 ? compact(e.data, 120) : "";
  return [at, e.id.padEnd(8), e.type.padEnd(16), refs, data].filter(Boolean).join("  ");
}
