import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deliverStart } from "../../src/delivery/deliver-start.ts";
import { DeliveryEngine } from "../../src/delivery/delivery-engine.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { body, declareType, intake, openWait } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// Deliveries whose answers come while something else happens: a redelivery begun, a batch still
// running. The worker is off: the test runs the jobs' code (the delivery engine) itself, in order.
// The endpoints are never backed off as a whole here (test/api/endpoint-isolation.test.ts is).

let app: TestApp;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  // A backoff of 5 s: a retry's due time tells it from "now" and from the request's limit (10 s).
  app = await startTestApp({ worker: false, env: { SIGNALBOX_DELIVERY_ENDPOINT_FAILURES: "1000", SIGNALBOX_DELIVERY_BACKOFF_S: "5" } });
  await declareType(app, "approval", { auth: { scheme: "none" } });
});
afterAll(async () => {
  await app?.close();
  await Promise.all(closers.map((c) => c()));
});

function held() {
  let release!: (status: number) => void;
  const answer = new Promise<number>((r) => (release = r));
  return { answer, release };
}

async function resolvedWait(run: string, url: string): Promise<string> {
  const { body: wait } = await openWait(app, run, { signal: "approval", callback_url: url }, 201);
  expect((await intake(app, run, "approval", "{}")).status).toBe(202);
  return wait.id as string;
}

const getWait = (id: string) => body(app.api(`/waits/${id}`));
/** When the job under `key` is due, in seconds from now. */
const dueInS = async (key: string) =>
  (await app.database.sql<Array<{ due_in_s: number }>>`select extract(epoch from run_at - clock_timestamp())::float8 as due_in_s from graphile_worker.jobs where key = ${key}`)[0]?.due_in_s;
const attempts = (id: string) => app.database.sql`select attempt, status_code, outcome from signalbox.delivery_attempts where wait_id = ${id} order by attempt`;

// POST /waits/{id}/redeliver (or /runs/{run}/start/redeliver) while an attempt sent before it is
// still in flight. The old attempt's answer, a 4xx, arrives after the redelivery began its round:
// it was recorded as that round's attempt and settled the delivery as failed, so the redelivery
// (answered 202) sent nothing, or its 2xx lost the compare-and-set and the wait said `failed`. It
// is now an earlier round's attempt (delivery_round): history only, the delivery still owed.
describe("redeliver while an earlier attempt is in flight", () => {
  it("the redelivery is sent (it was queued with 202), even when the old attempt answers 404 meanwhile", async () => {
    const old = held();
    const engine = await startCallbackReceiver((n) => (n === 1 ? old.answer : 204));
    closers.push(engine.close);
    const id = await resolvedWait("redeliver-in-flight-1", engine.url);
    const delivery = new DeliveryEngine(app.deps, { perEndpoint: 8, failuresToBackOff: 1000 });
    closers.push(() => delivery.stop());

    await delivery.deliver([id]); // attempt 1 sent; unanswered after the hand-off, the job lets go
    expect(engine.received).toHaveLength(1);
    const res = await app.api(`/waits/${id}/redeliver`, { method: "POST" });
    expect(res.status).toBe(202);
    expect((await body(res)).delivery.status).toBe("pending");

    old.release(404); // the old request's answer comes now
    await waitFor("the old attempt recorded", () => attempts(id), { until: (rows) => rows.length === 1 });
    expect(await dueInS(`deliver:${id}`), "the redelivery still sends now, not after the old attempt's backoff").toBeLessThanOrEqual(0);
    await delivery.deliver([id]); // the redelivery's job (due now)

    expect(engine.received.length, "requests the endpoint got: the redelivery queued with 202 must send one").toBe(2);
  });

  it("a redelivery the engine answered 2xx is not left `failed`", async () => {
    const old = held();
    const fresh = held();
    const engine = await startCallbackReceiver((n) => (n === 1 ? old.answer : fresh.answer));
    closers.push(engine.close);
    const id = await resolvedWait("redeliver-in-flight-2", engine.url);
    const delivery = new DeliveryEngine(app.deps, { perEndpoint: 8, failuresToBackOff: 1000 });
    closers.push(() => delivery.stop());

    await delivery.deliver([id]);
    expect((await app.api(`/waits/${id}/redeliver`, { method: "POST" })).status).toBe(202);
    const redelivery = delivery.deliver([id]); // the redelivery's job sends now
    await engine.waitFor(2);
    old.release(404);
    await waitFor("the old attempt recorded", () => attempts(id), { until: (rows) => rows.length === 1 });
    fresh.release(204); // the engine took the redelivered callback
    await redelivery;
    await new Promise((r) => setTimeout(r, 300));

    expect((await getWait(id)).delivery.status, "the endpoint answered the redelivery 204").toBe("pending");
    // The old answer is history (not the new round's); the redelivery's 204 lost the
    // compare-and-set to it, so one more send is queued (at least once, the same webhook-id).
    expect(await attempts(id)).toEqual([{ attempt: 1, status_code: 404, outcome: "retry" }]);
    const [job] = await app.database.sql`select 1 from graphile_worker.jobs where key = ${`deliver:${id}`}`;
    expect(job).toBeDefined();
    await delivery.deliver([id]);
    expect((await getWait(id)).delivery).toEqual({ status: "delivered", attempts: 2, last_error: null });
  });

  it("a run start's redelivery is sent even when the attempt in flight before it answers 404 meanwhile", async () => {
    const old = held();
    const engine = await startCallbackReceiver((n) => (n === 1 ? old.answer : 204));
    closers.push(engine.close);
    await declareType(app, "start-in-flight", { auth: { scheme: "none" }, start: { url: engine.url } });
    expect((await intake(app, "start-in-flight-1", "start-in-flight", "{}")).body).toMatchObject({ outcome: "started" });
    const delivery = new DeliveryEngine(app.deps, { perEndpoint: 8, failuresToBackOff: 1000 });
    closers.push(() => delivery.stop());

    await deliverStart(app.deps, "start-in-flight-1", undefined, delivery); // sent; unanswered after the hand-off
    expect(engine.received).toHaveLength(1);
    expect((await app.api("/runs/start-in-flight-1/start/redeliver", { method: "POST", json: {} })).status).toBe(202);
    old.release(404);
    const start = () => body(app.api("/runs/start-in-flight-1/start"));
    const recorded = await waitFor("the old attempt recorded", start, { until: (s) => s.delivery.attempts === 1 });
    expect(recorded.delivery).toEqual({ status: "pending", attempts: 1, last_error: "HTTP 404" });
    expect(await dueInS("start:start-in-flight-1"), "the redelivery still sends now").toBeLessThanOrEqual(0);

    await deliverStart(app.deps, "start-in-flight-1", undefined, delivery); // the redelivery's job
    expect(engine.received).toHaveLength(2);
    expect((await start()).delivery).toEqual({ status: "delivered", attempts: 2, last_error: null });
  });
});

// A callback let go of (unanswered after LET_GO_AFTER_MS) whose answer, a 503, comes while its batch
// job is still busy with another callback. The background record queues the retry at the wait's
// backoff (5 s here); the batch job then added "the job due after the limit" under the same
// key, replacing that retry: attempt 2 went ~12 s later. The background record now waits for that
// job to be queued.
describe("a callback let go of, answered with a retryable status while its batch is still running", () => {
  it("is retried after the wait's backoff, not after the attempt's time limit", async () => {
    const late503 = await startCallbackReceiver(() => new Promise((r) => setTimeout(() => r(503), 1_150)));
    const slowOk = await startCallbackReceiver((n) => new Promise((r) => setTimeout(() => r(204), n === 1 ? 800 : 900)));
    closers.push(late503.close, slowOk.close);
    const a = await resolvedWait("handoff-a", late503.url);
    const y1 = await resolvedWait("handoff-y1", slowOk.url);
    const y2 = await resolvedWait("handoff-y2", slowOk.url);
    // One request at a time per endpoint: y2 waits for y1's slot, so the batch runs ~1.7 s.
    const engine = new DeliveryEngine(app.deps, { perEndpoint: 1, failuresToBackOff: 1000 });
    await engine.deliver([a, y1, y2]);
    await new Promise((r) => setTimeout(r, 300)); // the background record, if it has not come yet

    const sql = app.database.sql;
    const [w] = await sql<{ delivery_status: string; delivery_attempts: number }[]>`select delivery_status, delivery_attempts from signalbox.waits where id = ${a}`;
    expect(w).toEqual({ delivery_status: "pending", delivery_attempts: 1 });
    const [job] = await sql<{ due_in_s: number }[]>`select extract(epoch from run_at - now())::float8 as due_in_s from graphile_worker.jobs where key = ${"deliver:" + a}`;
    // Attempt 1 answered 503: attempt 2 is due 5 s after it (SIGNALBOX_DELIVERY_BACKOFF_S), not ~10 s.
    expect(job!.due_in_s, "seconds until attempt 2").toBeLessThan(6);
    await engine.stop();
  });
});
