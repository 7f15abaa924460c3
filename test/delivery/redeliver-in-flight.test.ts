import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeliveryEngine } from "../../src/delivery/delivery-engine.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { body, declareType, intake, openWait } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// POST /waits/{id}/redeliver while an attempt sent before it is still in flight. The old
// attempt's answer, a 4xx, arrives after the redelivery began its round: it was recorded as that
// round's attempt and settled the delivery as failed, so the redelivery (answered 202) sent
// nothing, or its 2xx lost the compare-and-set and the wait said `failed`. It is now an earlier
// round's attempt (waits.delivery_round): history only, the delivery still owed.
// The worker is off: the test runs the jobs' code (the delivery engine) itself, in order.

let app: TestApp;
const closers: Array<() => Promise<void>> = [];
beforeAll(async () => {
  app = await startTestApp({ worker: false, env: { SIGNALBOX_DELIVERY_ENDPOINT_FAILURES: "1000" } });
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
const attempts = (id: string) => app.database.sql`select attempt, status_code, outcome from signalbox.delivery_attempts where wait_id = ${id} order by attempt`;

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
});
