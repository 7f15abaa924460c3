import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliverStart } from "../../src/delivery/deliver-start.ts";
import { DeliveryEngine } from "../../src/delivery/delivery-engine.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { body, declareType, intake } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// POST /runs/{run}/start/redeliver while the run.start attempt sent before it is in flight, as
// test/delivery/redeliver-in-flight.test.ts for a wait's callback: the old attempt's 4xx, answered
// after the redelivery began its round, is an earlier round's (run_starts.delivery_round). It
// stays listed; the start stays owed and is sent. The worker is off: the test runs the jobs.

let app: TestApp;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  app = await startTestApp({ worker: false, env: { SIGNALBOX_DELIVERY_ENDPOINT_FAILURES: "1000" } });
});
afterAll(async () => {
  await app?.close();
  await Promise.all(closers.map((c) => c()));
});

it("a run start's redelivery is sent even when the attempt in flight before it answers 404 meanwhile", async () => {
  let release!: (status: number) => void;
  const old = new Promise<number>((r) => (release = r));
  const engine = await startCallbackReceiver((n) => (n === 1 ? old : 204));
  closers.push(engine.close);
  await declareType(app, "start-in-flight", { auth: { scheme: "none" }, start: { url: engine.url } });
  expect((await intake(app, "start-in-flight-1", "start-in-flight", "{}")).body).toMatchObject({ outcome: "started" });
  const delivery = new DeliveryEngine(app.deps, { perEndpoint: 8, failuresToBackOff: 1000 });
  closers.push(() => delivery.stop());

  await deliverStart(app.deps, "start-in-flight-1", undefined, delivery); // sent; unanswered after the hand-off
  expect(engine.received).toHaveLength(1);
  expect((await app.api("/runs/start-in-flight-1/start/redeliver", { method: "POST", json: {} })).status).toBe(202);
  release(404);
  const start = () => body(app.api("/runs/start-in-flight-1/start"));
  const recorded = await waitFor("the old attempt recorded", start, { until: (s) => s.delivery.attempts === 1 });
  expect(recorded.delivery).toEqual({ status: "pending", attempts: 1, last_error: "HTTP 404" });

  await deliverStart(app.deps, "start-in-flight-1", undefined, delivery); // the redelivery's job
  expect(engine.received).toHaveLength(2);
  expect((await start()).delivery).toEqual({ status: "delivered", attempts: 2, last_error: null });
});
