import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliverStart } from "../../src/delivery/deliver-start.ts";
import { DeliveryEngine } from "../../src/delivery/delivery-engine.ts";
import { deliverNotification } from "../../src/notifications/deliver-notification.ts";
import { pollSensor } from "../../src/sensors/poll-sensor.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { body, declareType, intake, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// A run's start (run.start) and a wait's notifications, delivered by hand: the app runs without
// its worker, so the test decides what happened before the delivery job ran (a cancel) and when
// the job runner stops mid-request (graphile-worker aborts its jobs' signal a few seconds into
// a shutdown, or when the runner restarts after the database went away).

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
/** Answers, but after the abort: an endpoint hanging mid-attempt. */
let slow: Awaited<ReturnType<typeof startCallbackReceiver>>;

beforeAll(async () => {
  app = await startTestApp({ worker: false });
  engine = await startCallbackReceiver();
  slow = await startCallbackReceiver(() => new Promise((r) => setTimeout(() => r(204), 3_000)));
  await declareType(app, "order-placed", { auth: { scheme: "none" }, start: { url: engine.url } });
  await declareType(app, "slow-start", { auth: { scheme: "none" }, start: { url: slow.url } });
  await declareType(app, "slow-notify", { auth: { scheme: "none" }, notify_url: slow.url });
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
  await slow?.close();
});

/** The run.start events an endpoint received for a run. */
const startsOf = (r: typeof engine, run: string) => r.received.filter((cb) => (cb.json as { type?: string; run_id?: string }).type === "run.start" && (cb.json as { run_id?: string }).run_id === run);
const startsFor = (run: string) => startsOf(engine, run);

describe("a run cancelled before its start was delivered", () => {
  it("is not started: no run.start is sent, and its start says why", async () => {
    expect((await intake(app, "start-cancelled", "order-placed", "{}")).body).toMatchObject({ outcome: "started" });
    expect((await app.api("/runs/start-cancelled/cancel", { method: "POST", json: { reason: "changed my mind" } })).status).toBe(200);
    await deliverStart(app.deps, "start-cancelled");
    expect(startsFor("start-cancelled")).toEqual([]);
    expect((await body(app.api("/runs/start-cancelled/start"))).delivery).toEqual({ status: "failed", attempts: 1, last_error: "not sent: the run was cancelled" });
    // A redelivery of it sends nothing either.
    expect((await app.api("/runs/start-cancelled/start/redeliver", { method: "POST", json: {} })).status).toBe(202);
    await deliverStart(app.deps, "start-cancelled");
    expect(startsFor("start-cancelled")).toEqual([]);
  });
});

/** The job's signal aborts 200 ms into a request the endpoint does not answer for 3 s. */
async function abortedMidAttempt(deliver: (abort: AbortSignal, engine: DeliveryEngine) => Promise<unknown>, url = slow.url) {
  // One failure in a row would back the endpoint off: an abandoned request must not count as one.
  const engine = new DeliveryEngine(app.deps, { perEndpoint: 4, failuresToBackOff: 1 });
  const job = new AbortController();
  setTimeout(() => job.abort(), 200);
  try {
    await deliver(job.signal, engine);
    return engine.gate.isBackedOff(new URL(url).host);
  } finally {
    await engine.stop();
  }
}

/** The test runs the job itself: the one queued for it is taken off the queue, as a runner takes it. */
const takeJob = (jobKey: string) => app.database.sql`delete from graphile_worker._private_jobs where key = ${jobKey}`;

/** Jobs under a key due within a few seconds: the delivery is still owed. */
const dueSoon = async (task: string, jobKey: string) =>
  (
    await app.database.sql<{ n: number }[]>`
      select count(*)::int as n from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
      where t.identifier = ${task} and j.key = ${jobKey} and j.run_at < now() + interval '5 seconds'`
  )[0]!.n;

describe("an attempt aborted by the job runner stopping", () => {
  it("of a run.start is no attempt: nothing recorded, still pending, and sent again", async () => {
    expect((await intake(app, "start-aborted", "slow-start", "{}")).body).toMatchObject({ outcome: "started" });
    await takeJob("start:start-aborted");
    const backedOff = await abortedMidAttempt((abort, engine) => deliverStart(app.deps, "start-aborted", abort, engine));
    expect(startsOf(slow, "start-aborted")).toHaveLength(1); // it was sent, then abandoned
    expect((await body(app.api("/runs/start-aborted/start"))).delivery).toEqual({ status: "pending", attempts: 0, last_error: null });
    expect((await body(app.api("/runs/start-aborted/start/deliveries"))).items).toEqual([]);
    expect(backedOff).toBe(false);
    expect(await dueSoon("deliver_start", "start:start-aborted")).toBe(1);
  });

  it("of a notification is no attempt: nothing recorded, still pending, and sent again", async () => {
    const wait = (await openWait(app, "notify-aborted", { signal: "slow-notify" }, 201)).body as { id: string };
    const [n] = await app.database.sql<{ id: string }[]>`select id from signalbox.notifications where wait_id = ${wait.id}`;
    await takeJob(`notify:${n!.id}`);
    const backedOff = await abortedMidAttempt((abort, engine) => deliverNotification(app.deps, n!.id, abort, engine));
    expect(slow.received.filter((cb) => cb.json.wait?.id === wait.id)).toHaveLength(1);
    const [row] = await app.database.sql`select status, attempts, last_error from signalbox.notifications where id = ${n!.id}`;
    expect(row).toEqual({ status: "pending", attempts: 0, last_error: null });
    expect(backedOff).toBe(false);
    expect(await dueSoon("deliver_notification", `notify:${n!.id}`)).toBe(1);
  });

  it("of a sensor poll is no miss: its last poll is not used up, and it polls again", async () => {
    const hanging = createServer(() => {}); // a sensor target that never answers
    await new Promise<void>((r) => hanging.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/ready`;
    const wait = (await openWait(app, "sensor-aborted", { signal: "ready", sensor: { url, interval_s: 60, max_polls: 1 } }, 201)).body as { id: string };
    await takeJob(`sensor:${wait.id}`);
    const backedOff = await abortedMidAttempt((abort, engine) => pollSensor(app.deps, wait.id, abort, engine), url).finally(() => {
      hanging.closeAllConnections();
      hanging.close();
    });
    const [row] = await app.database.sql`select status, sensor_polls from signalbox.waits where id = ${wait.id}`;
    expect(row).toEqual({ status: "waiting", sensor_polls: 0 });
    expect(backedOff).toBe(false);
    expect(await dueSoon("poll_sensor", `sensor:${wait.id}`)).toBe(1);
  });
});
