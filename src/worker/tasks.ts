import type { TaskList } from "graphile-worker";
import { z } from "zod";
import type { Deps } from "../deps.ts";
import { deliverCallback } from "../delivery/deliver-callback.ts";
import { releaseDeadPools, scheduleSweep } from "../jobs/worker-pools.ts";
import { purgeExpiredReceipts } from "../signals/signals.queries.ts";
import { deliverNotification } from "../notifications/deliver-notification.ts";
import { pollSensor } from "../sensors/poll-sensor.ts";
import { expireWait } from "../timeouts/expire-wait.ts";
import { fireTimer } from "../timers/fire-timer.ts";
import { purgeOldRecords } from "../retention/purge-old-records.ts";
import { nextPurgeInS, PURGE_INTERVAL_S, schedulePurge } from "../retention/schedule-purge.ts";

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
    fire_timer: async function fireTimerTask(payload) {
      await fireTimer(deps, ById.parse(payload).id);
    },
    poll_sensor: async function pollSensorTask(payload, helpers) {
      await pollSensor(deps, ById.parse(payload).id, helpers.abortSignal);
    },
    deliver_notification: async function deliverNotificationTask(payload, helpers) {
      await deliverNotification(deps, ById.parse(payload).id, helpers.abortSignal);
    },
    sweep: async function sweepTask() {
      const released = await releaseDeadPools(deps.db, deps.workerStaleS);
      if (released.length > 0) deps.log.warn({ pools: released }, "released jobs held by dead worker pools");
      await purgeExpiredReceipts(deps.db);
      await schedulePurge(deps.db, PURGE_INTERVAL_S, true);
      await scheduleSweep(deps.db, sweepIntervalS(deps.workerStaleS), false);
    },
    purge_old_records: async function purgeOldRecordsTask(_payload, helpers) {
      await schedulePurge(deps.db, nextPurgeInS(await purgeOldRecords(deps, { abort: helpers.abortSignal })), false);
    },
  };
}

/**
 * A dead process's jobs run again at most stale + interval after its last heartbeat (heartbeats
 * come every stale/3): with the default 12 s, within about 11 s of its death (8 s to go stale,
 * then at most 3 s to the next sweep). A sweep is one short query for all processes together.
 */
export const sweepIntervalS = (staleS: number) => Math.max(1, staleS / 4);
