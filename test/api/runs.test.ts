import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { body, declareType, expectProblem, intake, openWait } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { CALLBACK_SECRET, startTestApp, type TestApp } from "../helpers/test-app.ts";

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver();
  await declareType(app, "approval");
  await declareType(app, "payment");
  await declareType(app, "shipment");
  await declareType(app, "buffered", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
});
afterAll(async () => {
  await app.close();
  await engine.close();
});

interface RunEvent {
  id: string;
  run_id: string;
  type: string;
  wait_id: string | null;
  signal_id: string | null;
  data: Record<string, unknown>;
  occurred_at: string;
}
const events = async (run: string, query = ""): Promise<{ items: RunEvent[]; next_cursor: string | null }> => body(app.api(`/runs/${run}/events${query}`));

describe("GET /runs/{run}", () => {
  it("shows the run with its open_waits count and control fields", async () => {
    await openWait(app, "run-1", { signal: "approval" });
    await openWait(app, "run-1", { signal: "payment" });
    await openWait(app, "run-1", { signal: "shipment" });
    await intake(app, "run-1", "payment", "{}");
    const res = await app.api("/runs/run-1");
    expect(res.status).toBe(200);
    expect(await body(res)).toMatchObject({
      run_id: "run-1",
      status: "active",
      control: {
        is_paused: false,
        paused_at: null,
        pause_reason: null,
        paused_by: null,
        is_cancelled: false,
        cancel_reason: null,
        cancelled_by: null,
      },
      parent_run_id: null,
      children: [],
      open_waits: 2,
    });
  });

  it("is 404 problem+json for a run never seen", async () => {
    const p = await expectProblem(await app.api("/runs/never-seen-run"), 404);
    expect(p.detail).toContain("never-seen-run");
  });

  it("accepts every character the contract allows in a run id", async () => {
    const run = "Order_17.v2:eu@tenant-1";
    expect((await openWait(app, run, { signal: "approval" })).status).toBe(201);
    expect(await body(app.api(`/runs/${encodeURIComponent(run)}`))).toMatchObject({ run_id: run, open_waits: 1 });
    const long = "r".repeat(200);
    expect((await openWait(app, long, { signal: "approval" })).status).toBe(201);
    expect((await body(app.api(`/runs/${long}`))).run_id).toBe(long);
  });
});

describe("POST /runs/{run}/cancel", () => {
  it("cancels every open wait, each with a signal.cancelled callback; cancelling twice is fine", async () => {
    const already = engine.received.length;
    const a = (await openWait(app, "cancel-run", { signal: "approval", callback_url: engine.url, timeout_s: 3600 })).body;
    const b = (await openWait(app, "cancel-run", { signal: "payment", callback_url: engine.url })).body;
    const c = (await openWait(app, "cancel-run", { signal: "shipment", callback_url: engine.url })).body;
    await intake(app, "cancel-run", "shipment", '{"shipped":true}'); // received before the cancel: stays received

    const res = await app.api("/runs/cancel-run/cancel", { method: "POST", json: { reason: "order withdrawn", by: "kim" } });
    expect(res.status).toBe(200);
    const run = await body(res);
    expect(run).toMatchObject({
      run_id: "cancel-run",
      status: "cancelled",
      open_waits: 0,
      control: { is_cancelled: true, cancel_reason: "order withdrawn", cancelled_by: "kim", is_paused: false },
    });

    for (const w of [a, b]) expect((await body(app.api(`/waits/${w.id}`))).status).toBe("cancelled");
    expect((await body(app.api(`/waits/${c.id}`))).status).toBe("received");

    await engine.waitFor(already + 3);
    const mine = engine.received.filter((cb) => cb.json.wait.run_id === "cancel-run");
    const cancelled = mine.filter((cb) => cb.json.type === "signal.cancelled");
    expect(cancelled.map((cb) => cb.json.wait.id).sort()).toEqual([a.id, b.id].sort());
    for (const cb of cancelled) {
      expect(new Webhook(CALLBACK_SECRET).verify(cb.body, cb.headers as Record<string, string>)).toMatchObject({ wait: { status: "cancelled" } });
    }

    const twice = await app.api("/runs/cancel-run/cancel", { method: "POST", json: { reason: "again", by: "lee" } });
    expect(twice.status).toBe(200);
    // the first cancel's reason stands, and no second round of callbacks goes out
    expect((await body(twice)).control).toMatchObject({ cancel_reason: "order withdrawn", cancelled_by: "kim" });
    await waitFor("the callback delivered", () => body(app.api(`/waits/${a.id}`)), { until: (w) => w.delivery.status === "delivered" });
    await waitFor("the callback delivered", () => body(app.api(`/waits/${b.id}`)), { until: (w) => w.delivery.status === "delivered" });
    expect(engine.received.filter((cb) => cb.json.wait.run_id === "cancel-run" && cb.json.type === "signal.cancelled")).toHaveLength(2);

    // later signals and waits are refused
    expect((await intake(app, "cancel-run", "approval", "{}")).body!.outcome).toBe("rejected_not_active");
    await expectProblem(await app.api("/runs/cancel-run/waits", { method: "POST", json: { signal: "approval" } }), 409);
  });

  it("works without a body, and on a run never seen (which is then cancelled)", async () => {
    const res = await app.api("/runs/cancel-fresh/cancel", { method: "POST" });
    expect(res.status).toBe(200);
    expect(await body(res)).toMatchObject({ run_id: "cancel-fresh", status: "cancelled", open_waits: 0, control: { cancel_reason: null, cancelled_by: null } });
    expect((await body(app.api("/runs/cancel-fresh"))).status).toBe("cancelled");
  });

  it("rejects an unknown field with 400 and cancels nothing", async () => {
    await openWait(app, "cancel-bad", { signal: "approval" });
    await expectProblem(await app.api("/runs/cancel-bad/cancel", { method: "POST", json: { reason: "x", force: true } }), 400);
    expect(await body(app.api("/runs/cancel-bad"))).toMatchObject({ status: "active", open_waits: 1 });
  });
});

describe("GET /runs/{run}/events", () => {
  it("lists the run's history oldest first, with every event type, and ?after= works", async () => {
    const run = "history";
    const w1 = (await openWait(app, run, { signal: "approval" })).body; // signal.waiting
    const sent = await intake(app, run, "approval", '{"approved":true}'); // signal.received
    const buffered = await intake(app, run, "buffered", "{}"); // signal.buffered
    const w2 = (await openWait(app, run, { signal: "payment", timeout_at: new Date(Date.now() - 1000).toISOString() })).body; // waiting + timeout
    expect(w2.status).toBe("timed_out");
    const w3 = (await openWait(app, run, { signal: "shipment" })).body; // signal.waiting
    await app.api(`/runs/${run}/cancel`, { method: "POST", json: { reason: "stop", by: "ops" } }); // run.cancelling, signal.cancelled, run.cancelled

    const page = await events(run);
    expect(page.next_cursor).toBeNull();
    expect(page.items.map((e) => [e.type, e.wait_id])).toEqual([
      ["signal.waiting", w1.id],
      ["signal.received", w1.id],
      ["signal.buffered", null],
      ["signal.waiting", w2.id],
      ["signal.timeout", w2.id],
      ["signal.waiting", w3.id],
      ["run.cancelling", null],
      ["signal.cancelled", w3.id],
      ["run.cancelled", null],
    ]);
    for (const e of page.items) {
      expect(e.id).toMatch(/^ev_/);
      expect(e.run_id).toBe(run);
      expect(Date.parse(e.occurred_at)).not.toBeNaN();
    }
    expect(page.items[1]!.signal_id).toBe(sent.body!.signal_id);
    expect(page.items[2]!.signal_id).toBe(buffered.body!.signal_id);
    expect(page.items[8]!.data).toMatchObject({ reason: "stop", by: "ops" });
    const times = page.items.map((e) => Date.parse(e.occurred_at));
    expect(times).toEqual([...times].sort((a, b) => a - b));

    const after = await events(run, `?after=${page.items[4]!.id}`);
    expect(after.items.map((e) => e.id)).toEqual(page.items.slice(5).map((e) => e.id));
    expect((await events(run, `?after=${page.items[8]!.id}`)).items).toEqual([]);

    // paging with limit and next_cursor passed as ?after=
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const p = await events(run, `?limit=3${cursor ? `&after=${cursor}` : ""}`);
      expect(p.items.length).toBeLessThanOrEqual(3);
      seen.push(...p.items.map((e) => e.id));
      cursor = p.next_cursor;
    } while (cursor);
    expect(seen).toEqual(page.items.map((e) => e.id));
  });

  it("shows only this run's events", async () => {
    await openWait(app, "history-a", { signal: "approval" });
    await openWait(app, "history-b", { signal: "approval" });
    const a = await events("history-a");
    expect(a.items.map((e) => e.run_id)).toEqual(["history-a"]);
    expect(await events("history-none")).toEqual({ items: [], next_cursor: null });
  });

  it.each(["bogus", "ev_", "ev_0", "ev_-1", "ev_1.5", "42", "ev_99999999999999999999"])("a bad ?after=%s is 400", async (after) => {
    await expectProblem(await app.api(`/runs/history/events?after=${encodeURIComponent(after)}`), 400);
  });
});
