import fs from "node:fs";
import { stringFlag, type Command } from "../command.ts";
import { UsageError } from "../exit-codes.ts";
import { fields } from "../output.ts";

export const send: Command = {
  name: ["send"],
  summary: "send a signal to a run (with the management token)",
  args: "<run> <signal>",
  arity: [2, 2],
  options: {
    data: { type: "string", short: "d" },
    "idempotency-key": { type: "string" },
    wait: { type: "string" },
  },
  help: `Options:
  -d, --data JSON         the payload: JSON text, @FILE to read it from a file, or @- for stdin (default {})
  --idempotency-key KEY   the same key and payload again is a duplicate, not a second signal
                          (default: a new key, used for this command's own retries)
  --wait SECONDS          wait up to SECONDS (at most 60) for the resume callback to be delivered,
                          and print its reply (the engine's JSON answer)
  --json                  the intake answer as JSON

Exits 0 when the signal is received, buffered, started or a duplicate; 1 when it is refused (the
outcome is printed: rejected_not_waiting, rejected_invalid_payload, ...).

Examples:
  signalbox send order-17 manager-approval --data '{"approved": true}'
  signalbox send order-17 payment --data @payment.json --idempotency-key pay-2026-001
  signalbox send order-17 manager-approval --data '{"approved": true}' --wait 30`,
  async run({ positionals, values, json, client, output, signal: interrupted }) {
    const [run, signal] = positionals as [string, string];
    const payload = readPayload(stringFlag(values, "data"));
    const key = idempotencyKey(stringFlag(values, "idempotency-key"));
    const waitS = waitSeconds(stringFlag(values, "wait"));
    // Few retries: a person at a terminal would rather hear at once that nothing answers.
    // Ctrl-C stops the retries at once (exit 130), rather than after them.
    const sent = await client().signals.send(run, signal, payload, {
      ...(key !== undefined ? { idempotencyKey: key } : {}),
      ...(waitS !== undefined ? { waitS } : {}),
      retry: { attempts: 3 },
      signal: interrupted,
    });
    if (json) return output.out(JSON.stringify(sent, null, 2));
    output.out(
      fields([
        ["outcome", sent.outcome],
        ["signal", sent.signal_id],
        ["sequence", String(sent.sequence)],
        ["wait", sent.wait_id ?? "- (kept until a wait for it opens)"],
        ["idempotency key", sent.idempotency_key],
        ...(sent.reply_pending === undefined ? [] : [["reply", replyLine(sent)] as [string, string]]),
      ]),
    );
  },
};

/**
 * Checked here, so a key HTTP cannot carry is a usage error, not the client's TypeError: empty
 * (signalbox would take it for no key), or with a character a header value cannot hold (beyond
 * Latin-1, an ASCII control character) or would lose (whitespace at either end).
 */
function idempotencyKey(text: string | undefined): string | undefined {
  if (text === undefined) return undefined;
  if (text === "") throw new UsageError("--idempotency-key must not be empty (leave it out to have one generated)");
  if (!/^[\x21-\x7e\x80-\xff]([\x20-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?$/.test(text)) {
    throw new UsageError(`--idempotency-key must be characters an HTTP header can carry: Latin-1, no ASCII control characters, no space at either end (got '${text}')`);
  }
  return text;
}

function waitSeconds(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const s = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || !(s > 0 && s <= 60)) throw new UsageError(`--wait must be a number of seconds, more than 0 and at most 60 (got '${text}')`);
  return s;
}

/** The reply, or why there is none. */
function replyLine(sent: { reply?: unknown; reply_pending?: boolean; delivery_status?: string | null }): string {
  if (sent.reply_pending) return "- (not delivered yet: read it later with the signal's id)";
  if (sent.delivery_status === "delivered") return sent.reply === null || sent.reply === undefined ? "- (the callback answered without JSON)" : JSON.stringify(sent.reply);
  if (sent.delivery_status === "failed") return "- (the callback's delivery failed)";
  return "- (the wait has no callback)";
}

function readPayload(data: string | undefined): unknown {
  if (data === undefined) return {};
  let text = data;
  if (data.startsWith("@")) {
    const file = data.slice(1);
    try {
      text = fs.readFileSync(file === "-" ? 0 : file, "utf8");
    } catch (err) {
      throw new UsageError(`cannot read ${file === "-" ? "stdin" : file}: ${(err as Error).message}`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--data is not JSON: ${(err as Error).message}`);
  }
}
