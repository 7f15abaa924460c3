import { sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { valueAt } from "../core/json-pointer.ts";
import { jsonDepthExceeds } from "../core/json-text.ts";
import { readCapped } from "../core/read-capped.ts";
import { callbackHost } from "../delivery/callback-host.ts";
import { classifyAttempt } from "../delivery/classify-response.ts";
import type { DeliveryEngine } from "../delivery/delivery-engine.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { lockRun } from "../runs/run-lock.ts";
import { MAX_JSON_DEPTH } from "../signals/send-signal.ts";
import { receiveWait, resolveWaits } from "../waits/resolve-waits.ts";
import { findWait } from "../waits/waits.queries.ts";
import { jsonEqual, SENSOR_DEFAULTS, type SensorSpec } from "../waits/kinds/sensor-spec.ts";
import { sensorTargetAllowed } from "../waits/kinds/sensor-target.ts";

export const MAX_SENSOR_BODY_BYTES = 256 * 1024;

/** `failed`: the endpoint failed (no answer, 5xx, 408, 429), as the endpoint gate counts failures. */
/** A poll's answer; `abandoned`: the job's abort (its runner stopping) ended it, so it is no miss. */
type Poll = { met: true; payload: unknown } | { met: false; reason: string; failed: boolean; abandoned?: true };

type SensorDeps = Pick<Deps, "db" | "config" | "log">;

/**
 * One sensor poll (each poll is a job). The first response that meets the condition is the
 * payload and the wait is received; a miss schedules the next poll after `interval_s` (±10%
 * jitter, so many sensors do not poll in step); after `max_polls` misses the wait times out.
 * With the delivery engine (the worker's), the poll goes through the endpoint gate as callbacks
 * do: a host backed off or stuck puts the poll off (not counted as one), and the job lets go of
 * a poll unanswered after a second (a poll job due after its limit keeps it owed; the answer is
 * acted on when it comes), so a hung sensor holds no job slot for its time limit.
 */
export async function pollSensor(deps: SensorDeps, waitId: string, abort?: AbortSignal, engine?: Pick<DeliveryEngine, "sendOne">): Promise<"received" | "missed" | "timed_out" | "not_waiting" | "deferred"> {
  const wait = await findWait(deps.db, waitId);
  if (!wait || wait.status !== "waiting" || wait.kind !== "sensor") return "not_waiting";
  const spec = { ...SENSOR_DEFAULTS, ...(wait.source as SensorSpec) };
  const timeoutMs = deps.config.SIGNALBOX_SENSOR_TIMEOUT_MS;
  const poll = (signal?: AbortSignal) => pollOnce(spec, deps.config.SIGNALBOX_SENSOR_ALLOW, timeoutMs, signal);
  if (!engine) return actOnPoll(deps, wait, spec, await poll(abort));
  let outcome: Awaited<ReturnType<typeof pollSensor>> = "deferred";
  await engine.sendOne(
    {
      host: callbackHost(spec.url),
      job: { task: "poll_sensor", id: waitId, jobKey: jobKeys.sensor(waitId) },
      limitMs: timeoutMs,
      send: poll,
      failed: (p) => !p.met && p.failed,
      abandoned: (p) => !p.met && p.abandoned === true,
      settle: async (p) => void (outcome = await actOnPoll(deps, wait, spec, p)),
    },
    abort,
  );
  return outcome;
}

/** The poll's answer, under the run's lock: received, or a miss counted (the next poll scheduled, or the wait timed out). */
async function actOnPoll(
  deps: SensorDeps,
  wait: NonNullable<Awaited<ReturnType<typeof findWait>>>,
  spec: Required<Pick<SensorSpec, "url" | "method" | "expect_status" | "interval_s" | "max_polls">> & SensorSpec,
  poll: Poll,
): Promise<"received" | "missed" | "timed_out" | "not_waiting"> {
  const waitId = wait.id;
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
    if (!(await sensorTargetAllowed(spec.url, allow))) return { met: false, reason: "the host resolves to a link-local address", failed: false };
    const timeout = AbortSignal.timeout(timeoutMs);
    const res = await fetch(spec.url, { method: spec.method, redirect: "manual", signal: abort ? AbortSignal.any([abort, timeout]) : timeout, headers: { "user-agent": "signalbox-sensor" } });
    const bytes = await readCapped(res.body, MAX_SENSOR_BODY_BYTES);
    if (bytes === null) return { met: false, reason: `response larger than ${MAX_SENSOR_BODY_BYTES} bytes`, failed: false };
    const text = Buffer.from(bytes).toString("utf8");
    if (res.status !== spec.expect_status) return { met: false, reason: `HTTP ${res.status}`, failed: classifyAttempt(res.status) === "retry" };
    // As at intake: nesting this deep would overflow the stack when the payload is stored
    // (JSON.stringify) or read back, so it is refused like an oversized body, before parsing.
    if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) return { met: false, reason: `the response nests deeper than ${MAX_JSON_DEPTH} levels`, failed: false };
    let body: unknown = text;
    try {
      body = text.length > 0 ? JSON.parse(text) : null;
    } catch {
      if (spec.pointer !== undefined) return { met: false, reason: "the response is not JSON", failed: false };
    }
    if (spec.pointer !== undefined) {
      const value = valueAt(body, spec.pointer);
      if (spec.equals !== undefined ? !jsonEqual(value, spec.equals) : value === undefined) return { met: false, reason: `${spec.pointer} does not match`, failed: false };
    }
    return { met: true, payload: body };
  } catch (err) {
    if (abort?.aborted) return { met: false, reason: "abandoned: the job runner is stopping", failed: false, abandoned: true };
    return { met: false, reason: (err as Error).name === "TimeoutError" ? "timed out" : `request failed: ${(err as Error).message}`, failed: true };
  }
}
