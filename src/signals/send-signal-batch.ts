import type { Deps } from "../deps.ts";
import { sendSignal } from "./send-signal.ts";
import { OUTCOME_STATUS, type IntakeAnswer } from "./signal-outcome.ts";

export interface BatchItem {
  run_id: string;
  signal: string;
  payload?: unknown;
  idempotency_key?: string;
}

/** Each item goes through the same intake as a single signal (its own transaction), in order. */
export async function sendSignalBatch(deps: Pick<Deps, "db" | "secretBox" | "signalTypeCache">, items: BatchItem[]): Promise<Array<IntakeAnswer & { status: number }>> {
  const results: Array<IntakeAnswer & { status: number }> = [];
  for (const item of items) {
    const answer = await sendSignal(deps, {
      runId: item.run_id,
      signal: item.signal,
      body: Buffer.from(JSON.stringify(item.payload ?? null)),
      idempotencyKey: item.idempotency_key,
      credentials: { management: true, headers: () => [], nowSeconds: Math.floor(Date.now() / 1000) },
    });
    results.push({ ...answer, status: OUTCOME_STATUS[answer.outcome] });
  }
  return results;
}
