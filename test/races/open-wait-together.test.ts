import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { resolutionEvents } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// Opening a plain wait is one statement (signalbox.open_wait, src/waits/open-wait.ts
// openPlainWait) decided under the run's lock: concurrent opens of one run and name give one
// wait, the same key gives the same wait, and a buffered signal resolves the new wait at once
// with its event and callback, exactly as the transaction path does.

const N = 20;
let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_DB_POOL_SIZE: "10" } });
  engine = await startCallbackReceiver();
  await declareType(app, "approval");
  await declareType(app, "early", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
});

const together = <T>(n: number, one: (i: number) => Promise<T>) => Promise.all(Array.from({ length: n }, (_, i) => one(i)));

describe("opening waits at the same moment", () => {
  it(`${N} opens of one run and name without a key: one wait (201), the rest 409`, async () => {
    const answers = await together(N, () => openWait(app, "same-name", { signal: "approval", timeout_s: 3600 }));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409)).toHaveLength(N - 1);
    const waits = (await (await app.api("/runs/same-name/waits")).json()) as { items: Array<{ status: string }> };
    expect(waits.items.map((w) => w.status)).toEqual(["waiting"]);
    // No timeout job of its own (the deadline alarm, due before it, covers a deadline an hour away), and none left by the 409s.
    const [jobs] = await app.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'expire_wait'`;
    expect(jobs!.n).toBe(0);
  });

  it(`${N} opens with one key: one wait created (201), the others answered with it (200)`, async () => {
    const answers = await together(N, () => openWait(app, "same-key", { signal: "approval", key: "k1", timeout_s: 3600 }));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(N - 1);
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
  });

  it("a buffered signal resolves the new wait at once: received with its result, one event, one callback", async () => {
    const sent = await intake(app, "early-run", "early", '{"ok":1}');
    expect(sent.body).toMatchObject({ outcome: "buffered" });
    const { status, body: wait } = await openWait(app, "early-run", { signal: "early", timeout_s: 3600, callback_url: engine.url });
    expect(status).toBe(201);
    expect(wait).toMatchObject({ status: "received", result: { signal_id: sent.body!.signal_id, payload: { ok: 1 } } });
    const callbacks = await waitFor("the callback of the wait the buffered signal received", async () => engine.received.filter((cb) => cb.json.wait.id === wait.id), { until: (cbs) => cbs.length > 0 });
    expect(callbacks.map((cb) => cb.json.type)).toEqual(["signal.received"]);
    expect((await resolutionEvents(app, "early-run")).map((e) => e.type)).toEqual(["signal.received"]);
    // No timeout job was queued for a wait that never waited.
    const [jobs] = await app.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where key = ${`expire:${wait.id}`}`;
    expect(jobs!.n).toBe(0);
  });

  it("a wait opened with a deadline already past times out at once (the transaction path takes it)", async () => {
    const { status, body: wait } = await openWait(app, "late-run", { signal: "approval", timeout_at: new Date(Date.now() - 1000).toISOString() });
    expect(status).toBe(201);
    expect(wait.status).toBe("timed_out");
  });
});
