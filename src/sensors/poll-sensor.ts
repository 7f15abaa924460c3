import { sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { valueAt } from "../core/json-pointer.ts";
import { readCapped } from "../core/read-capped.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { lockRun } from "../runs/run-lock.ts";
import { receiveWait, resolveWaits } from "../waits/resolve-waits.ts";
import { findWait } from "../waits/waits.queries.ts";
import { jsonEqual, SENSOR_DEFAULTS, type SensorSpec } from "../waits/kinds/sensor-spec.ts";
import { sensorTargetAllowed } from "../waits/kinds/sensor-target.ts";

export const MAX_SENSOR_BODY_BYTES = 256 * 1024;

type Poll = { met: true; payload: unknown } | { met: false; reason: string };

/**
 * One sensor poll (each poll is a job). The first response that meets the condition is the
 * payload and the wait is received; a miss schedules the next poll after `interval_s` (±10%
 * jitter, so many sensors do not poll in step); after `max_polls` misses the wait times out.
 */
export async function pollSensor(deps: Pick<Deps, "db" | "config" | "log">, waitId: string, abort?: AbortSignal): Promise<"received" | "missed" | "timed_out" | "not_waiting"> {
  const wait = await findWait(deps.db, waitId);
  if (!wait || wait.status !== "waiting" || wait.kind !== "sensor") return "not_waiting";
  const spec = { ...SENSOR_DEFAULTS, ...(wait.source as SensorSpec) };
  const poll = await pollOnce(spec, deps.config.SIGNALBOX_SENSOR_ALLOW, deps.config.SIGNALBOX_SENSOR_TIMEOUT_MS, abort);
  deps.log.debug({ waitId, met: poll.met, reason: poll.met ? undefined : poll.reason }, "sensor poll");

  return withTransaction(deps.db, async (tx) => {
    await lockRun(tx, wait.runId);
    const current = await findWait(tx, waitId);
    if (!current || current.status !== "waiting" || current.sensorPolls !== wait.sensorPolls) return "not_waiting"; // someone else polled
    if (poll.met) {
      await receiveWait(tx, waitId, poll.payload);
      return "received";
    }
    const polls = current.sensorPolls + 1;
    await tx.execute(sql`update signalbox.waits set sensor_polls = ${polls}::int where id = ${waitId}::text`);
    if (polls >= spec.max_polls) {
      await resolveWaits(tx, { ids: [waitId] }, { status: "timed_out", data: { reason: `sensor missed ${polls} polls`, last: poll.reason } });
      return "timed_out";
    }
    const delayS = spec.interval_s * (0.9 + Math.random() * 0.2);
    await addJob(tx, "poll_sensor", { id: waitId }, { runAt: sql`now() + ${delayS}::double precision * interval '1 second'`, jobKey: jobKeys.sensor(waitId) });
    return "missed";
  });
}

async function pollOnce(spec: Required<Pick<SensorSpec, "url" | "method" | "expect_status">> & SensorSpec, allow: string[], timeoutMs: number, abort?: AbortSignal): Promise<Poll> {
  try {
    if (!(await sensorTargetAllowed(spec.url, allow))) return { met: false, reason: "the host resolves to a link-local address" };
    const timeout = AbortSignal.timeout(timeoutMs);
    const res = await fetch(spec.url, { method: spec.method, redirect: "manual", signal: abort ? AbortSignal.any([abort, timeout]) : timeout, headers: { "user-agent": "signalbox-sensor" } });
    const bytes = await readCapped(res.body, MAX_SENSOR_BODY_BYTES);
    if (bytes === null) return { met: false, reason: `response larger than ${MAX_SENSOR_BODY_BYTES} bytes` };
    const text = Buffer.from(bytes).toString("utf8");
    if (res.status !== spec.expect_status) return { met: false, reason: `HTTP ${res.status}` };
    let body: unknown = text;
    try {
      body = text.length > 0 ? JSON.parse(text) : null;
    } catch {
      if (spec.pointer !== undefined) return { met: false, reason: "the response is not JSON" };
    }
    if (spec.pointer !== undefined) {
      const value = valueAt(body, spec.pointer);
      if (spec.equals !== undefined ? !jsonEqual(value, spec.equals) : value === undefined) return { met: false, reason: `${spec.pointer} does not match` };
    }
    return { met: true, payload: body };
  } catch (err) {
    return { met: false, reason: (err as Error).name === "TimeoutError" ? "timed out" : `request failed: ${(err as Error).message}` };
  }
}
