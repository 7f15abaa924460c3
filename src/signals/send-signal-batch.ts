import type { Deps } from "../deps.ts";
import { parseJsonText } from "../core/json-text.ts";
import { sendSignal } from "./send-signal.ts";
import { OUTCOME_STATUS, type IntakeAnswer } from "./signal-outcome.ts";

/** A validated item; its payload is read from the body text (see sendSignalBatch). */
export interface BatchItem {
  run_id: string;
  signal: string;
  idempotency_key?: string;
}

/**
 * Each item goes through the same intake as a single signal (its own transaction), in order.
 * `body` is the request's JSON text the items were validated from: each payload is taken from
 * it, not from `items`, whose numbers went through doubles (2^53+1 read as 2^53, 1e400 as
 * Infinity, written back as null).
 */
export async function sendSignalBatch(deps: Pick<Deps, "db" | "secretBox" | "signalTypeCache">, items: BatchItem[], body: string): Promise<Array<IntakeAnswer & { status: number }>> {
  const payloads = payloadTexts(body);
  const results: Array<IntakeAnswer & { status: number }> = [];
  for (const [i, item] of items.entries()) {
    const answer = await sendSignal(deps, {
      runId: item.run_id,
      signal: item.signal,
      body: Buffer.from(payloads[i]!),
      idempotencyKey: item.idempotency_key,
      credentials: { management: true, headers: () => [], nowSeconds: Math.floor(Date.now() / 1000) },
    });
    results.push({ ...answer, status: OUTCOME_STATUS[answer.outcome] });
  }
  return results;
}

/**
 * Each item's payload as JSON text with every number written as the sender wrote it:
 * parseJsonText keeps the source of numbers a double would change, and JSON.stringify writes
 * those back verbatim. Intake then stores and checks the same digits as for a single signal
 * (only the whitespace between tokens is not kept).
 */
function payloadTexts(body: string): string[] {
  const { signals } = parseJsonText(body) as { signals: Array<{ payload?: unknown }> };
  return signals.map((s) => JSON.stringify(s.payload ?? null));
}
