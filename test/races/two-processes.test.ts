import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { drainJobs, resolutionEvents } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { advanceClock } from "../helpers/clock.ts";
import { openWait } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Several processes may share one database: every timeout and every callback fires once.
// Two full services (API + job worker each) on one database, as two replicas would run.

let first: TestApp;
let second: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
beforeAll(async () => {
  first = await startTestApp();
  second = await startTestApp({ databaseUrl: first.databaseUrl });
  engine = await startCallbackReceiver();
  const res = await first.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } });
  expect(res.status).toBe(201);
});
afterAll(async () => {
  await second?.close(); // the second shares the first's database; the first drops it
  await first?.close();
  await engine?.close();
});

describe("two processes on one database", () => {
  it("fire each of 100 timeouts once and deliver each callback once", async () => {
    const n = 100;
    const waits = await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const app = i % 2 === 0 ? first : second;
        const { body: wait } = await openWait(app, `replicas-${i}`, { signal: "approval", timeout_s: 60, callback_url: engine.url }, 201);
        return { run: `replicas-${i}`, id: wait.id as string };
      }),
    );
    await advanceClock(first, 60); // all 100 fall due at once; both processes' workers are woken

    await engine.waitFor(n, 20_000);
    await drainJobs(first); // nothing pending or running: no further callback can come

    expect(engine.received).toHaveLength(n);
    expect(engine.received.every((cb) => cb.json.type === "signal.timeout")).toBe(true);
    const webhookIds = engine.received.map((cb) => cb.headers["webhook-id"]);
    expect(new Set(webhookIds).size).toBe(n);
    expect(new Set(engine.received.map((cb) => cb.json.wait.id))).toEqual(new Set(waits.map((w) => w.id)));

    for (const w of waits) {
      const events = await resolutionEvents(second, w.run);
      expect(events.map((e) => [e.type, e.wait_id])).toEqual([["signal.timeout", w.id]]);
      const cb = engine.received.find((c) => c.json.wait.id === w.id)!;
      expect(cb.headers["webhook-id"]).toBe(events[0]!.id);
    }
    const [row] = await first.database.sql<{ timed_out: number; delivered: number }[]>`
      select count(*) filter (where status = 'timed_out')::int as timed_out,
             count(*) filter (where delivery_status = 'delivered' and delivery_attempts = 1)::int as delivered
      from signalbox.waits`;
    expect(row).toEqual({ timed_out: n, delivered: n });
  });

  it("a replica that dies holding the sweep job strands nothing: a survivor still releases its jobs", async () => {
    // Simulates a third process that crashed mid-sweep: it holds the one `sweep` job and a due
    // timeout, and stops heartbeating. Nothing may wait for graphile-worker's 4-hour lock expiry.
    const { body: wait } = await openWait(first, "replicas-dead", { signal: "approval", timeout_s: 3600, callback_url: engine.url }, 201);
    const sql = first.database.sql;
    await sql`insert into signalbox.worker_pools (pool_id, seen_at) values ('dead-pool', now())`;
    // A live worker may be running the sweep right now; take it once it is free.
    await waitFor("the sweep job free to take", () =>
      sql.begin(async (tx) => {
        const swept = await tx`
          update graphile_worker._private_jobs set locked_at = now(), locked_by = 'dead-pool', attempts = attempts + 1
          where key = 'sweep' and locked_at is null returning id`;
        if (swept.length === 0) return false;
        await tx`
          update graphile_worker._private_jobs set locked_at = now(), locked_by = 'dead-pool', attempts = 1, run_at = now()
          where key = ${`expire:${wait.id}`}`;
        await tx`update signalbox.waits set timeout_at = now() where id = ${wait.id}`;
        return true;
      }),
    );

    const settled = await (await first.api(`/waits/${wait.id}?wait_s=20`)).json();
    expect(settled).toMatchObject({ status: "timed_out" });
    const callbacks = await engine.waitFor(101);
    expect(callbacks.filter((cb) => cb.json.wait.id === wait.id)).toHaveLength(1);
  });
});
