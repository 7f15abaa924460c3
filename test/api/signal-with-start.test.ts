import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSignalTypesFile } from "../../src/signal-types/load-signal-types-file.ts";
import { startCallbackReceiver, type ReceivedCallback } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { body, declareType, expectProblem, intake, openWait } from "../helpers/http.ts";
import { drainJobs } from "../helpers/race-gates.ts";
import { CALLBACK_SECRET, startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Signal-with-start (issue 16, item 1): a signal of a type that declares `start` for a run never
// seen is `started`, kept for the run's first wait of that name, and a signed run.start event is
// POSTed to the start URL, retried and recorded like callbacks. Real server, real receiver.

const MAX_ATTEMPTS = 3;
let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
/** Per run id: the status the engine answers its run.start with (default 204). */
const answers = new Map<string, number[]>();

interface StartEvent {
  id: string;
  type: string;
  occurred_at: string;
  run_id: string;
  signal: { id: string; name: string; payload: unknown };
}
const startsFor = (run: string) => engine.received.filter((cb) => (cb.json as unknown as StartEvent).run_id === run);

beforeAll(async () => {
  engine = await startCallbackReceiver((_n, cb) => {
    const run = (cb.json as unknown as StartEvent).run_id;
    return answers.get(run)?.shift() ?? 204;
  });
  app = await startTestApp({ env: { SIGNALBOX_DELIVERY_MAX_ATTEMPTS: String(MAX_ATTEMPTS), SIGNALBOX_DELIVERY_ENDPOINT_FAILURES: "1000" } });
  await declareType(app, "order-placed", { auth: { scheme: "none" }, start: { url: engine.url } });
  await declareType(app, "order-placed-ttl", { auth: { scheme: "none" }, buffer_ttl_s: 5, start: { url: engine.url } });
  await declareType(app, "plain", { auth: { scheme: "none" } });
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
});

async function startEvents(run: string, n: number): Promise<ReceivedCallback[]> {
  return waitFor(`${n} run.start for ${run}`, () => startsFor(run), { until: (cbs) => cbs.length >= n });
}

describe("declaring a signal type with start", () => {
  it("returns start in GET, and null for a type without it", async () => {
    expect(await body(app.api("/signal-types/order-placed"))).toMatchObject({ start: { url: engine.url } });
    expect(await body(app.api("/signal-types/plain"))).toMatchObject({ start: null });
  });

  it.each([
    ["a URL that is not http(s)", { url: "ftp://engine/start" }, "/start/url"],
    ["not a URL", { url: "engine:9000" }, "/start/url"],
    ["an unknown key", { url: "http://engine/start", secret: "x" }, "/start/secret"],
    ["no url", {}, "/start/url"],
  ])("refuses %s with 400, and declares nothing", async (_what, start, path) => {
    const res = await app.api("/signal-types/bad-start", { method: "PUT", json: { auth: { scheme: "none" }, start } });
    const problem = await expectProblem(res, 400);
    expect(problem.validation_errors?.map((e) => e.path)).toContain(path);
    expect((await app.api("/signal-types/bad-start")).status).toBe(404);
  });
});

describe("SIGNALBOX_SIGNAL_TYPES_FILE with start", () => {
  it("declares a type's start, and names the entry and field of a bad one", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "sbx-types-"));
    const file = path.join(dir, "types.json");
    await fs.writeFile(file, JSON.stringify({ "from-file": { auth: { scheme: "none" }, start: { url: "http://engine.internal:9000/start" } } }));
    expect(await loadSignalTypesFile(app.deps, file, {})).toEqual(["from-file"]);
    expect(await body(app.api("/signal-types/from-file"))).toMatchObject({ start: { url: "http://engine.internal:9000/start" } });
    await fs.writeFile(file, JSON.stringify({ "bad-file": { auth: { scheme: "none" }, start: { url: "mailto:ops@example.com" } } }));
    await expect(loadSignalTypesFile(app.deps, file, {})).rejects.toThrow(/entry 'bad-file', field 'start.url': must be an http\(s\) URL/);
    await fs.rm(dir, { recursive: true });
  });
});

describe("a signal for a run never seen", () => {
  it("is started: 202, sequence 1, and one signed run.start event reaches the start URL", async () => {
    const sent = await intake(app, "order-1", "order-placed", '{"order": 1,  "total": 12.50}');
    expect(sent.status).toBe(202);
    expect(sent.body).toEqual({ outcome: "started", signal_id: expect.stringMatching(/^sg_/), sequence: 1, wait_id: null, run_id: "order-1" });

    const [start] = await startEvents("order-1", 1);
    // Verified with the Standard Webhooks library, as an engine would.
    const verified = new Webhook(CALLBACK_SECRET).verify(start!.body, start!.headers as Record<string, string>) as StartEvent;
    expect(verified).toEqual({
      id: start!.headers["webhook-id"],
      type: "run.start",
      occurred_at: expect.any(String),
      run_id: "order-1",
      signal: { id: sent.body!.signal_id, name: "order-placed", payload: { order: 1, total: 12.5 } },
    });

    // The run's history records the start; the event's id is the webhook-id.
    const events = (await body(app.api("/runs/order-1/events"))).items as Array<{ id: string; type: string; signal_id: string | null; data: unknown }>;
    expect(events.map((e) => e.type)).toEqual(["run.started"]);
    expect(events[0]).toMatchObject({ id: verified.id, signal_id: sent.body!.signal_id, data: { signal: "order-placed", sequence: 1 } });
    // The signal log shows it started; GET /runs/{run}/start shows the delivery.
    const log = (await body(app.api("/runs/order-1/signals"))).items;
    expect(log).toMatchObject([{ id: sent.body!.signal_id, outcome: "started", sequence: 1, wait_id: null }]);
    const shown = await waitFor("start delivered", async () => body(app.api("/runs/order-1/start")), { until: (s) => s.delivery.status === "delivered" });
    expect(shown).toMatchObject({ run_id: "order-1", signal_id: sent.body!.signal_id, signal: "order-placed", webhook_id: verified.id, delivery: { attempts: 1, last_error: null } });
    expect((await body(app.api("/runs/order-1/start/deliveries"))).items).toMatchObject([{ run_id: "order-1", attempt: 1, status_code: 204, outcome: "delivered", webhook_id: verified.id }]);
  });

  it("is consumed by the run's first wait of that name, received at once, then later signals follow buffer_ttl_s", async () => {
    const first = await intake(app, "order-2", "order-placed", '{"n": 1}');
    const second = await intake(app, "order-2", "order-placed", '{"n": 2}');
    expect(first.body).toMatchObject({ outcome: "started", sequence: 1 });
    // Before the run's first wait, the engine is still starting: kept (no TTL), not rejected.
    expect(second.body).toMatchObject({ outcome: "buffered", sequence: 2 });
    const buffered = (await body(app.api("/signals?outcome=buffered&limit=500"))).items as Array<{ id: string }>;
    expect(buffered.map((s) => s.id)).toContain(second.body!.signal_id);
    const started = (await body(app.api("/signals?outcome=started&limit=500"))).items as Array<{ id: string }>;
    expect(started.map((s) => s.id)).toContain(first.body!.signal_id);

    const w1 = await openWait(app, "order-2", { signal: "order-placed" }, 201);
    expect(w1.body).toMatchObject({ status: "received", result: { signal_id: first.body!.signal_id, sequence: 1, payload: { n: 1 } } });
    const w2 = await openWait(app, "order-2", { signal: "order-placed" }, 201);
    expect(w2.body).toMatchObject({ status: "received", result: { signal_id: second.body!.signal_id, sequence: 2 } });

    // The run is seen and its start consumed: the type's buffer_ttl_s (0) applies again.
    const third = await intake(app, "order-2", "order-placed", '{"n": 3}');
    expect(third.status).toBe(409);
    expect(third.body).toMatchObject({ outcome: "rejected_not_waiting" });
    const log = (await body(app.api("/runs/order-2/signals"))).items as Array<{ outcome: string; wait_id: string | null }>;
    expect(log.map((s) => [s.outcome, s.wait_id])).toEqual([
      ["started", w1.body.id],
      ["buffered", w2.body.id],
      ["rejected_not_waiting", null],
    ]);
    await startEvents("order-2", 1);
    await drainJobs(app);
    expect(startsFor("order-2")).toHaveLength(1);
  });

  it("does not expire by buffer_ttl_s: the first wait opened an hour later still takes it", async () => {
    const first = await intake(app, "order-ttl", "order-placed-ttl", "{}");
    expect(first.body).toMatchObject({ outcome: "started" });
    await advanceClock(app, 3600);
    const w = await openWait(app, "order-ttl", { signal: "order-placed-ttl" }, 201);
    expect(w.body).toMatchObject({ status: "received", result: { signal_id: first.body!.signal_id } });
    expect((await body(app.api(`/signals?outcome=expired`))).items.filter((s: { run_id: string }) => s.run_id === "order-ttl")).toEqual([]);
  });

  it("sent again with its Idempotency-Key is a duplicate answering like the first, and starts nothing more", async () => {
    const a = await intake(app, "order-idem", "order-placed", '{"x": 1}', { "idempotency-key": "k-1" });
    const b = await intake(app, "order-idem", "order-placed", '{"x": 1}', { "idempotency-key": "k-1" });
    expect(a.body).toMatchObject({ outcome: "started", sequence: 1 });
    expect(b.status).toBe(200);
    expect(b.body).toEqual({ outcome: "duplicate", signal_id: a.body!.signal_id, sequence: 1, wait_id: null, run_id: "order-idem" });
    await startEvents("order-idem", 1);
    await drainJobs(app);
    expect(startsFor("order-idem")).toHaveLength(1);
  });

  it("a run made by pause alone is not seen yet: it is started; a cancelled run is rejected_not_active", async () => {
    expect((await app.api("/runs/order-paused/pause", { method: "POST", json: { reason: "x" } })).status).toBe(200);
    expect((await intake(app, "order-paused", "order-placed", "{}")).body).toMatchObject({ outcome: "started" });
    expect((await app.api("/runs/order-cancelled/cancel", { method: "POST", json: {} })).status).toBe(200);
    const refused = await intake(app, "order-cancelled", "order-placed", "{}");
    expect(refused).toMatchObject({ status: 409, body: { outcome: "rejected_not_active" } });
    expect((await app.api("/runs/order-cancelled/start")).status).toBe(404);
  });

  it("a run that opened a wait, or took a signal, is seen: no start", async () => {
    await declareType(app, "other", { auth: { scheme: "none" }, buffer_ttl_s: 60 });
    await openWait(app, "seen-by-wait", { signal: "other", timeout_s: 0 }, 201);
    expect((await intake(app, "seen-by-wait", "order-placed", "{}")).body).toMatchObject({ outcome: "rejected_not_waiting" });
    expect((await intake(app, "seen-by-signal", "other", "{}")).body).toMatchObject({ outcome: "buffered", sequence: 1 });
    expect((await intake(app, "seen-by-signal", "order-placed", "{}")).body).toMatchObject({ outcome: "rejected_not_waiting" });
    for (const run of ["seen-by-wait", "seen-by-signal"]) expect((await app.api(`/runs/${run}/start`)).status).toBe(404);
  });

  it("a type without start behaves as before: rejected_not_waiting", async () => {
    expect((await intake(app, "never-seen-plain", "plain", "{}"))).toMatchObject({ status: 409, body: { outcome: "rejected_not_waiting" } });
  });

  it("a dead letter redriven to a run still never seen starts it (redrive goes through the same intake)", async () => {
    await declareType(app, "late-start", { auth: { scheme: "none" } });
    const dead = await intake(app, "order-redriven", "late-start", '{"late": true}');
    expect(dead).toMatchObject({ status: 409, body: { outcome: "rejected_not_waiting" } }); // a rejection takes no sequence: still never seen
    await declareType(app, "late-start", { auth: { scheme: "none" }, start: { url: engine.url } });
    const res = await app.api("/signals/redrive", { method: "POST", json: { signal_id: dead.body!.signal_id } });
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ outcome: "started", sequence: 1, redriven_from: dead.body!.signal_id });
    const [start] = await startEvents("order-redriven", 1);
    expect(start!.json).toMatchObject({ type: "run.start", signal: { name: "late-start", payload: { late: true } } });
  });

  it("through POST /signals/batch: each run never seen is started once, in order", async () => {
    const res = await app.api("/signals/batch", {
      method: "POST",
      json: {
        signals: [
          { run_id: "batch-a", signal: "order-placed", payload: { i: 0 } },
          { run_id: "batch-b", signal: "order-placed", payload: { i: 1 } },
          { run_id: "batch-a", signal: "order-placed", payload: { i: 2 } },
          { run_id: "batch-c", signal: "plain", payload: { i: 3 } },
        ],
      },
    });
    expect(res.status).toBe(200);
    const results = (await body(res)).results as Array<{ outcome: string; sequence?: number }>;
    expect(results.map((r) => [r.outcome, r.sequence])).toEqual([
      ["started", 1],
      ["started", 1],
      ["buffered", 2],
      ["rejected_not_waiting", undefined],
    ]);
    for (const run of ["batch-a", "batch-b"]) expect((await startEvents(run, 1))[0]!.json).toMatchObject({ type: "run.start", run_id: run });
  });
});

describe("delivering run.start", () => {
  it("is retried with the same webhook-id, each attempt recorded; failing ones are listed by GET /deliveries and redeliverable", async () => {
    answers.set("order-flaky", [503, 400]);
    await intake(app, "order-flaky", "order-placed", "{}");
    const failed = await waitFor("start failed", async () => body(app.api("/runs/order-flaky/start")), { until: (s) => s.delivery.status === "failed" });
    expect(failed.delivery).toEqual({ status: "failed", attempts: 2, last_error: "HTTP 400" });
    const sent = startsFor("order-flaky");
    expect(sent).toHaveLength(2);
    expect(new Set(sent.map((cb) => cb.headers["webhook-id"]))).toEqual(new Set([failed.webhook_id]));
    const attempts = (await body(app.api("/runs/order-flaky/start/deliveries"))).items;
    expect(attempts).toMatchObject([
      { attempt: 1, status_code: 503, outcome: "retry", error: "HTTP 503" },
      { attempt: 2, status_code: 400, outcome: "failed", error: "HTTP 400" },
    ]);

    const listed = (await body(app.api("/deliveries?status=failed"))).items as Array<{ kind: string; run_id: string; wait_id: string | null }>;
    expect(listed.filter((d) => d.run_id === "order-flaky")).toEqual([
      expect.objectContaining({ kind: "start", wait_id: null, signal: "order-placed", status: "failed", attempts: 2, last_status_code: 400 }),
    ]);

    const again = await app.api("/runs/order-flaky/start/redeliver", { method: "POST", json: {} });
    expect(again.status).toBe(202);
    await startEvents("order-flaky", 3);
    const delivered = await waitFor("start redelivered", async () => body(app.api("/runs/order-flaky/start")), { until: (s) => s.delivery.status === "delivered" });
    expect(delivered.delivery).toEqual({ status: "delivered", attempts: 3, last_error: null });
    expect(startsFor("order-flaky")[2]!.headers["webhook-id"]).toBe(failed.webhook_id);
    expect(((await body(app.api("/deliveries"))).items as Array<{ run_id: string }>).some((d) => d.run_id === "order-flaky")).toBe(false);
  });

  it("404 for a run no signal started, and 400 for a malformed run id", async () => {
    expect((await app.api("/runs/nobody/start")).status).toBe(404);
    expect((await app.api("/runs/nobody/start/deliveries")).status).toBe(404);
    expect((await app.api("/runs/nobody/start/redeliver", { method: "POST", json: {} })).status).toBe(404);
    await expectProblem(await app.api("/runs/bad%20run/start"), 400);
  });
});
