import type { TaskList } from "graphile-worker";
import { z } from "zod";
import type { Deps } from "../core/context.ts";
import { deliverCallback } from "../delivery/deliver-callback.ts";
import { releaseDeadPools, scheduleSweep } from "../jobs/worker-pools.ts";
import { purgeExpiredReceipts } from "../signals/signals.queries.ts";
import { expireWait } from "../timeouts/expire-wait.ts";

/** Jobs carry ids only; state lives in our tables. Payloads are parsed, never trusted. */
const ById = z.object({ id: z.string().min(1) });

export interface TaskDeps extends Deps {
  workerStaleS: number;
}

export function taskList(deps: TaskDeps): TaskList {
  return {
    expire_wait: async function expireWaitTask(payload) {
      await expireWait(deps, ById.parse(payload).id);
    },
    deliver_callback: async function deliverCallbackTask(payload, helpers) {
      await deliverCallback(deps, ById.parse(payload).id, helpers.abortSignal);
    },
    sweep: async function sweepTask() {
      const released = await releaseDeadPools(deps.db, deps.workerStaleS);
      if (released.length > 0) deps.log.warn({ pools: released }, "released jobs held by dead worker pools");
      await purgeExpiredReceipts(deps.db);
      await scheduleSweep(deps.db, sweepIntervalS(deps.workerStaleS), false);
    },
  };
}

export const sweepIntervalS = (staleS: number) => Math.max(1, staleS / 2);
