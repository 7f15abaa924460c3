import type { Deps } from "../deps.ts";
import { callbackBatchesDueNow, releaseEveryPool } from "../jobs/worker-pools.ts";

/**
 * At the start of a process that owns its database (embedded), before its worker runs: the
 * callbacks and timeouts a killed predecessor held (running, or waiting in its local queue) are
 * released at once, and so are the callbacks it had in hand without a job running for them
 * (handed off by intake, or queued at their endpoint).
 */
export async function releaseAfterCrash(db: Deps["db"], log: Deps["log"]): Promise<void> {
  const pools = await releaseEveryPool(db);
  if (pools.length > 0) log.warn({ pools }, "released the jobs of worker pools left by a process that died");
  const batches = await callbackBatchesDueNow(db);
  if (batches > 0) log.warn({ jobs: batches }, "callbacks a process that died had in hand are due now");
}
