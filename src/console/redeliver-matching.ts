import type { Deps } from "../deps.ts";
import { ServiceError } from "../core/errors.ts";
import { findFailingDeliveries } from "../delivery/list-deliveries.ts";
import { redeliverStart } from "../delivery/deliver-start.ts";
import { redeliverWait } from "../waits/cancel-wait.ts";

/** Deliveries one "redeliver all" press sends again at most; past it the operator presses again. */
export const REDELIVER_ALL_CAP = 1000;
const BATCH = 100;

export interface DeliveryFilter {
  status?: "failed" | "pending";
  callbackHost?: string;
}

/**
 * "Redeliver all matching": walks the failing deliveries the filter shows (the same listing as
 * GET /deliveries) and redelivers each with the verb of POST /waits/{id}/redeliver (a run start's
 * with that of POST /runs/{run}/start/redeliver), one transaction per delivery, each at most
 * once a press. A wait that cannot be redelivered now (it lost its callback, say) is counted as
 * skipped, not an error for the rest.
 */
export async function redeliverMatching(deps: Pick<Deps, "db">, filter: DeliveryFilter): Promise<{ redelivered: number; skipped: number; more: boolean }> {
  let redelivered = 0;
  let skipped = 0;
  // The listing is ordered by each delivery's latest attempt: a delivery redelivered here that
  // fails again moves to its end, ahead of the walk. Each is sent again once per press.
  const seen = new Set<string>();
  let cursor: string | undefined;
  for (;;) {
    const limit = Math.min(BATCH, REDELIVER_ALL_CAP - redelivered - skipped);
    const found = await findFailingDeliveries(deps, { ...filter, limit, ...(cursor ? { cursor } : {}) });
    for (const d of found.items) {
      const key = d.wait_id === null ? `start:${d.run_id}` : `wait:${d.wait_id}`;
      if (seen.has(key)) continue;
      seen.add(key);
      try {
        if (d.wait_id === null) await redeliverStart(deps, d.run_id);
        else await redeliverWait(deps, d.wait_id);
        redelivered++;
      } catch (err) {
        if (!(err instanceof ServiceError)) throw err;
        skipped++;
      }
    }
    if (!found.next_cursor) return { redelivered, skipped, more: false };
    if (redelivered + skipped >= REDELIVER_ALL_CAP) return { redelivered, skipped, more: true };
    cursor = found.next_cursor;
  }
}
