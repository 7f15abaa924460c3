import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeliveryEngine } from "../../src/delivery/delivery-engine.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// A callback in flight when its job is aborted (graphile-worker aborts a pool's jobs a few seconds
// into its shutdown: the runner restarting after the database went away, or the process stopping)
// was not answered by the endpoint: it is not recorded as a failed attempt, does not count toward
// backing the endpoint off, and is sent again by a job of its own.

let app: TestApp;
/** Answers, but after the abort. */
let slow: Awaited<ReturnType<typeof startCallbackReceiver>>;

beforeAll(async () => {
  app = await startTestApp({ worker: false }); // this test runs the delivery itself
  await declareType(app, "approval", { auth: { scheme: "none" } });
  slow = await startCallbackReceiver(() => new Promise((r) => setTimeout(() => r(204), 5_000)));
});
afterAll(async () => {
  await app?.close();
  await slow?.close();
});

describe("a callback whose job is aborted mid-request", () => {
  it("is no attempt: nothing recorded, the endpoint not backed off, and a job sends it again", async () => {
    const wait = (await openWait(app, "abandoned", { signal: "approval", callback_url: slow.url }, 201)).body as { id: string };
    expect((await intake(app, "abandoned", "approval", "{}")).status).toBe(202);
    // One failure in a row would back the endpoint off: an abandoned request must not count as one.
    const engine = new DeliveryEngine(app.deps, { perEndpoint: 4, failuresToBackOff: 1 });
    const job = new AbortController();
    setTimeout(() => job.abort(), 200);
    await engine.deliver([wait.id], job.signal);

    const sql = app.database.sql;
    expect(await sql`select attempt, outcome, error from signalbox.delivery_attempts where wait_id = ${wait.id}`).toEqual([]);
    const [w] = await sql<{ delivery_status: string; delivery_attempts: number }[]>`select delivery_status, delivery_attempts from signalbox.waits where id = ${wait.id}`;
    expect(w).toEqual({ delivery_status: "pending", delivery_attempts: 0 });
    expect(engine.gate.isBackedOff(new URL(slow.url).host)).toBe(false);
    // Besides the job that queued it (this test ran the delivery by hand): one due in a moment,
    // naming the attempt it keeps owed.
    const jobs = await sql<{ n: number }[]>`
      select count(*)::int as n from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
      where t.identifier = 'deliver_callback' and j.payload::jsonb @> ${JSON.stringify([{ id: wait.id, attempts: 0, round: 0 }])}::jsonb and j.run_at > now() and j.run_at < now() + interval '5 seconds'`;
    expect(jobs[0]!.n).toBe(1);
    await engine.stop();
  });
});
