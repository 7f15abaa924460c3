import type { TaskList } from "graphile-worker";
import { z } from "zod";
import type { Deps } from "../deps.ts";
import { DeliveryEngine } from "../delivery/delivery-engine.ts";
import { deliverStart } from "../delivery/deliver-start.ts";
import { releaseDeadPools, scheduleSweep } from "../jobs/worker-pools.ts";
import { purgeExpiredReceipts } from "../signals/signals.queries.ts";
import { deliverNotification } from "../notifications/deliver-notification.ts";
import { pollSensor } from "../sensors/poll-sensor.ts";
import { armDeadlineAlarm } from "../jobs/deadline-alarm.ts";
import { expireWait, runDeadlineAlarm } from "../timeouts/expire-wait.ts";
import { fireTimer } from "../timers/fire-timer.ts";
import { purgeOldRecords } from "../retention/purge-old-records.ts";
import { nextPurgeInS, PURGE_INTERVAL_S, schedulePurge } from "../retention/schedule-purge.ts";

/** Jobs carry ids only; state lives in our tables. Payloads are parsed, never trusted. */
const ById = z.object({ id: z.string().min(1) });
/**
 * A callback the delivery engine let go of, owed by its batch job only while its wait's delivery
 * is still at this attempt: a retry or a redelivery since has a job of its own (DeliveryEngine).
 */
const AtAttempt = z.object({ id: z.string().min(1), attempts: z.number().int().min(0), round: z.number().int().min(0) });
/** A delivery job: one wait (a retry, a redelivery), or a batch (an array, merged by graphile-worker). */
const Deliveries = z.union([ById.transform((p) => [p.id]), z.array(z.union([z.string().min(1), AtAttempt, ById.transform((p) => p.id)]))]);

export interface TaskDeps extends Deps {
  workerStaleS: number;
}

/**
 * The outbound HTTP jobs (callbacks, notifications, run starts, sensor polls): they run in a runner of their
 * own, so an endpoint that hangs never holds a slot a timeout or a timer needs, and all go
 * through the delivery engine's endpoint gate, so one never holds a delivery slot for long either.
 */
export function deliveryTaskList(deps: TaskDeps, engine: DeliveryEngine): TaskList {
  return {
    deliver_callback: async function deliverCallbackTask(payload, helpers) {
      await engine.deliver(Deliveries.parse(payload), helpers.abortSignal);
    },
    deliver_notification: async function deliverNotificationTask(payload, helpers) {
      await deliverNotification(deps, ById.parse(payload).id, helpers.abortSignal, engine);
    },
    deliver_start: async function deliverStartTask(payload, helpers) {
      await deliverStart(deps, ById.parse(payload).id, helpers.abortSignal, engine);
    },
    poll_sensor: async function pollSensorTask(payload, helpers) {
      await pollSensor(deps, ById.parse(payload).id, helpers.abortSignal, engine);
    },
  };
}

/** Timeouts, timers and housekeeping: database work only, never waiting on an endpoint. */
export function timerTaskList(deps: TaskDeps): TaskList {
  return {
    expire_wait: async function expireWaitTask(payload) {
      await expireWait(deps, ById.parse(payload).id);
    },
    expire_due: async function expireDueTask() {
      await runDeadlineAlarm(deps);
    },
    fire_timer: async function fireTimerTask(payload) {
      await fireTimer(deps, ById.parse(payload).id);
    },
    sweep: async function sweepTask() {
      const released = await releaseDeadPools(deps.db, deps.workerStaleS);
      if (released.length > 0) deps.log.warn({ pools: released }, "released jobs held by dead worker pools");
      await purgeExpiredReceipts(deps.db);
      await schedulePurge(deps.db, PURGE_INTERVAL_S, true);
      await armDeadlineAlarm(deps.db); // missing (an upgrade, a fresh database) or pushed back by a failure
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

/** Every task, in one list (tests that run due jobs themselves, on a worker of their own). */
export function taskList(deps: TaskDeps): TaskList {
  const engine = new DeliveryEngine(deps, {
    perEndpoint: deps.config.SIGNALBOX_DELIVERY_ENDPOINT_CONCURRENCY,
    failuresToBackOff: deps.config.SIGNALBOX_DELIVERY_ENDPOINT_FAILURES,
  });
  return { ...timerTaskList(deps), ...deliveryTaskList(deps, engine) };
}
