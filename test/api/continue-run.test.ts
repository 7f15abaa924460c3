import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { body, declareType, expectProblem, intake, openWait, send } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// POST /runs/{run}/continue (continue-as-new): the old run's waits are cancelled with reason
// `continued`, its buffered signals move to the new run, and later signals and waits addressed
// to any run of the chain go to its newest run.

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver();
  await declareType(app, "approval");
  await declareType(app, "kept", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
});
afterAll(async () => {
  await app.close();
  await engine.close();
});

const continueRun = (run: string, json: Record<string, unknown>) => send(app, "POST", `/runs/${encodeURIComponent(run)}/continue`, json);
const run = (id: string) => body(app.api(`/runs/${encodeURIComponent(id)}`));
const events = async (id: string) => (await body(app.api(`/runs/${encodeURIComponent(id)}/events?limit=500`))).items as Array<{ type: string; data: Record<string, unknown>; signal_id: string | null; wait_id: string | null }>;
const signalsOf = async (id: string) => (await body(app.api(`/runs/${encodeURIComponent(id)}/signals?limit=500`))).items as Array<Record<string, any>>;

describe("POST /runs/{run}/continue", () => {
  it("cancels the open waits with reason continued (signal.cancelled callbacks), moves buffered signals in order, and shows the chain", async () => {
    const already = engine.received.length;
    const wait = (await openWait(app, "c1", { signal: "approval", callback_url: engine.url, timeout_s: 3600 }, 201)).body;
    for (const n of [1, 2, 3]) expect((await intake(app, "c1", "kept", JSON.stringify({ n }))).body).toMatchObject({ outcome: "buffered", sequence: n, run_id: "c1" });
    // The new run exists already, with a signal of its own: the moved ones come after it.
    expect((await intake(app, "c1-next", "kept", JSON.stringify({ own: true }))).body).toMatchObject({ outcome: "buffered", sequence: 1, run_id: "c1-next" });

    const res = await continueRun("c1", { run_id: "c1-next", by: "engine", reason: "history too long" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ run_id: "c1", status: "continued", continued_as: "c1-next", continued_from: null, newest_run_id: "c1-next", open_waits: 0 });
    expect(await run("c1-next")).toMatchObject({ status: "active", continued_as: null, continued_from: "c1", newest_run_id: "c1-next" });

    const [cb] = (await engine.waitFor(already + 1)).slice(already);
    expect(cb!.json).toMatchObject({ type: "signal.cancelled", wait: { id: wait.id, run_id: "c1", status: "cancelled" } });
    const cancelled = (await events("c1")).find((e) => e.type === "signal.cancelled");
    expect(cancelled).toMatchObject({ wait_id: wait.id, data: { reason: "continued", continued_as: "c1-next", by: "engine" } });

    // Moved in order, after the new run's own signal, with the new run's next sequences.
    const moved = (await signalsOf("c1-next")).map((s) => [s.sequence, JSON.parse(JSON.stringify(s.payload))]);
    expect(moved).toEqual([[1, { own: true }], [2, { n: 1 }], [3, { n: 2 }], [4, { n: 3 }]]);
    expect(await signalsOf("c1")).toEqual([]);
    const continued = (await events("c1")).find((e) => e.type === "run.continued")!;
    expect(continued.data).toMatchObject({ continued_as: "c1-next", newest_run_id: "c1-next", by: "engine", reason: "history too long", cancelled_waits: [wait.id], kept_signals: [] });
    expect((continued.data.moved_signals as unknown[]).map((m: any) => [m.from_sequence, m.sequence])).toEqual([[1, 2], [2, 3], [3, 4]]);
    expect((await events("c1-next")).map((e) => e.type)).toEqual(["signal.buffered", "run.continued_from", "signal.buffered", "signal.buffered", "signal.buffered"]);

    // A wait on the new run now consumes them oldest first.
    expect((await openWait(app, "c1-next", { signal: "kept" }, 201)).body).toMatchObject({ status: "received", result: { sequence: 1 } });
    expect((await openWait(app, "c1", { signal: "kept", key: "second" }, 201)).body).toMatchObject({ run_id: "c1-next", status: "received", result: { sequence: 2 } });
  });

  it("a buffered vote moved to a new run whose quorum wait is open counts as a vote: received only once the votes decide it", async () => {
    await declareType(app, "ballot", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
    const quorum = (await openWait(app, "q-next", { signal: "ballot", quorum: { count: 3 } }, 201)).body;
    for (const responder of ["kim", "lee"]) expect((await intake(app, "q-old", "ballot", JSON.stringify({ response: "approve", responder }))).body).toMatchObject({ outcome: "buffered" });
    expect((await continueRun("q-old", { run_id: "q-next" })).status).toBe(200);
    expect(await body(app.api(`/waits/${quorum.id}`))).toMatchObject({ status: "waiting", votes: { approve: ["kim", "lee"] } });
    expect((await intake(app, "q-next", "ballot", JSON.stringify({ response: "approve", responder: "max" }))).body).toMatchObject({ outcome: "received" });
    expect(await body(app.api(`/waits/${quorum.id}`))).toMatchObject({ status: "received", votes: { approve: ["kim", "lee", "max"] } });
  });

  it("applies later signals and waits addressed to any run of the chain to its newest run; intake answers name it", async () => {
    expect((await continueRun("ch-a", { run_id: "ch-b" })).status).toBe(200);
    expect((await continueRun("ch-b", { run_id: "ch-c" })).status).toBe(200);
    expect(await run("ch-a")).toMatchObject({ continued_as: "ch-b", newest_run_id: "ch-c" });

    const w = (await openWait(app, "ch-a", { signal: "approval", key: "step-1" }, 201)).body;
    expect(w.run_id).toBe("ch-c");
    // The key is the newest run's: the same key again through any id of the chain is the same wait.
    expect((await openWait(app, "ch-b", { signal: "approval", key: "step-1" }, 200)).body.id).toBe(w.id);
    expect((await openWait(app, "ch-a", { signal: "approval" })).status).toBe(409); // one open wait per name, on ch-c

    const sent = await intake(app, "ch-a", "approval", '{"ok":true}', { "idempotency-key": "k1" });
    expect(sent).toMatchObject({ status: 202, body: { outcome: "received", wait_id: w.id, sequence: 1, run_id: "ch-c" } });
    expect((await body(app.api(`/waits/${w.id}`))).status).toBe("received");
    // A retry through another id of the chain is the same signal.
    expect(await intake(app, "ch-b", "approval", '{"ok":true}', { "idempotency-key": "k1" })).toMatchObject({ status: 200, body: { outcome: "duplicate", signal_id: sent.body!.signal_id, run_id: "ch-c" } });
    const rejected = await intake(app, "ch-a", "approval", "{}");
    expect(rejected).toMatchObject({ status: 409, body: { outcome: "rejected_not_waiting", run_id: "ch-c" } });
    expect(rejected.body!.detail).toContain("ch-c");

    // Refused before the run's lock (a schema, the JSON): logged on the run addressed, and said so.
    expect((await intake(app, "ch-a", "approval", "{not json")).body).toMatchObject({ outcome: "invalid_json", run_id: "ch-a" });
    // The batch too.
    const batch = await body(send(app, "POST", "/signals/batch", { signals: [{ run_id: "ch-b", signal: "approval", payload: {} }, { run_id: "plain", signal: "kept", payload: {} }] }));
    expect(batch.results).toMatchObject([{ outcome: "rejected_not_waiting", run_id: "ch-c" }, { outcome: "buffered", run_id: "plain" }]);
  });

  it("keeps a signal taken before the continue a duplicate when the sender retries it to the old id", async () => {
    await openWait(app, "dup-old", { signal: "approval" }, 201);
    const first = await intake(app, "dup-old", "approval", '{"v":1}', { "idempotency-key": "once" });
    expect(first.body).toMatchObject({ outcome: "received", run_id: "dup-old" });
    expect((await continueRun("dup-old", { run_id: "dup-new" })).status).toBe(200);
    await openWait(app, "dup-new", { signal: "approval" }, 201);
    expect(await intake(app, "dup-old", "approval", '{"v":1}', { "idempotency-key": "once" })).toMatchObject({
      status: 200,
      body: { outcome: "duplicate", signal_id: first.body!.signal_id, run_id: "dup-old" },
    });
    expect((await intake(app, "dup-old", "approval", '{"v":2}', { "idempotency-key": "once" })).body).toMatchObject({ outcome: "rejected_idempotency_conflict", run_id: "dup-new" });
  });

  it("does not move a buffered signal whose idempotency key the new run holds already: it stays behind, listed as kept", async () => {
    const a = await intake(app, "idem-old", "kept", '{"from":"old"}', { "idempotency-key": "same" });
    await intake(app, "idem-old", "kept", '{"n":2}', { "idempotency-key": "other" });
    await intake(app, "idem-new", "kept", '{"from":"new"}', { "idempotency-key": "same" });
    expect((await continueRun("idem-old", { run_id: "idem-new" })).status).toBe(200);
    expect((await signalsOf("idem-new")).map((s) => [s.sequence, s.idempotency_key])).toEqual([[1, "same"], [2, "other"]]);
    expect((await signalsOf("idem-old")).map((s) => [s.id, s.outcome])).toEqual([[a.body!.signal_id, "buffered"]]);
    const continued = (await events("idem-old")).find((e) => e.type === "run.continued")!;
    expect(continued.data.kept_signals).toEqual([{ signal_id: a.body!.signal_id, signal: "kept", reason: "idempotency_key_taken" }]);
  });

  it("lets a moved signal be received at once by a wait the new run already has", async () => {
    await intake(app, "pre-old", "kept", '{"x":1}');
    const w = (await openWait(app, "pre-new", { signal: "kept", callback_url: engine.url }, 201)).body;
    const already = engine.received.length;
    expect((await continueRun("pre-old", { run_id: "pre-new" })).status).toBe(200);
    expect(await body(app.api(`/waits/${w.id}`))).toMatchObject({ status: "received", result: { sequence: 1, payload: { x: 1 } } });
    const [cb] = (await engine.waitFor(already + 1)).slice(already);
    expect(cb!.json).toMatchObject({ type: "signal.received", wait: { id: w.id, run_id: "pre-new" } });
  });

  it("follows the chain for waits opened by the transaction path too (timers, composites) and for redrive", async () => {
    await intake(app, "tx-old", "approval", '{"early":true}'); // a dead letter: nobody waits yet
    const [dead] = (await signalsOf("tx-old")).filter((x) => x.outcome === "rejected_not_waiting");
    expect((await continueRun("tx-old", { run_id: "tx-new" })).status).toBe(200);
    const timer = (await openWait(app, "tx-old", { signal: "tick", timer: { delay_s: 3600 } }, 201)).body;
    expect(timer.run_id).toBe("tx-new");
    const all = (await openWait(app, "tx-old", { signal: "both", all: [{ signal: "approval" }, { signal: "tock", timer: { delay_s: 3600 } }] }, 201)).body;
    expect(all.run_id).toBe("tx-new");
    const member = (await body(app.api("/runs/tx-new/waits?status=waiting"))).items.find((w: any) => w.signal === "approval");
    const redriven = await send(app, "POST", "/signals/redrive", { signal_id: dead!.id });
    expect(redriven.status).toBe(202);
    expect(await redriven.json()).toMatchObject({ outcome: "received", wait_id: member.id, run_id: "tx-new", redriven_from: dead!.id });
  });

  it("is idempotent to the same run, and refuses another target, itself, a cycle, a taken target and cancelled runs with 409", async () => {
    expect((await continueRun("r-a", { run_id: "r-b" })).status).toBe(200);
    const again = await continueRun("r-a", { run_id: "r-b" });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ status: "continued", continued_as: "r-b" });
    expect((await events("r-a")).filter((e) => e.type === "run.continued")).toHaveLength(1);

    const elsewhere = await expectProblem(await continueRun("r-a", { run_id: "r-x" }), 409);
    expect(elsewhere).toMatchObject({ title: "already_continued", type: "https://signalbox.dev/problems/already-continued", continued_as: "r-b" });
    expect((await expectProblem(await continueRun("r-self", { run_id: "r-self" }), 409)).title).toBe("continue_cycle");
    await continueRun("r-b", { run_id: "r-c" });
    const cycle = await expectProblem(await continueRun("r-c", { run_id: "r-a" }), 409);
    expect(cycle).toMatchObject({ title: "continue_cycle", type: "https://signalbox.dev/problems/continue-cycle" });
    expect((await expectProblem(await continueRun("r-other", { run_id: "r-b" }), 409)).title).toBe("target_has_predecessor");

    await send(app, "POST", "/runs/r-dead/cancel", { reason: "gone" });
    expect((await expectProblem(await continueRun("r-dead", { run_id: "r-fresh" }), 409)).title).toBe("run_cancelled");
    expect((await expectProblem(await continueRun("r-live", { run_id: "r-dead" }), 409)).title).toBe("target_cancelled");
    // Nothing of the refused ones changed.
    expect(await run("r-c")).toMatchObject({ status: "active", continued_as: null, continued_from: "r-b" });
    expect((await app.api("/runs/r-live")).status).toBe(404); // a refusal creates no run either
  });

  it("continues a paused run; the new run is not paused, and a checkpoint of the old run is 409", async () => {
    await send(app, "POST", "/runs/p-old/pause", { reason: "maintenance" });
    expect(await body(continueRun("p-old", { run_id: "p-new" }))).toMatchObject({ status: "continued", control: { is_paused: false } });
    expect(await run("p-new")).toMatchObject({ status: "active", control: { is_paused: false } });
    const p = await expectProblem(await app.api("/runs/p-old/checkpoints/step", { method: "POST" }), 409);
    expect(p).toMatchObject({ continued_as: "p-new", proceed: false });
    expect(await body(app.api("/runs/p-new/checkpoints/step", { method: "POST" }))).toEqual({ proceed: true });
  });

  it("answers bad input with 400 problem+json and changes nothing", async () => {
    expect((await expectProblem(await continueRun("bad-1", {}), 400)).validation_errors).toBeDefined();
    await expectProblem(await continueRun("bad-1", { run_id: "has space" }), 400);
    await expectProblem(await continueRun("bad-1", { run_id: "ok", extra: 1 }), 400);
    await expectProblem(await app.api("/runs/bad-1/continue", { method: "POST", body: "{", headers: { "content-type": "application/json" } }), 400);
    expect((await app.api("/runs/bad-1")).status).toBe(404);
    expect((await fetch(`${app.baseUrl}/runs/bad-1/continue`, { method: "POST", body: '{"run_id":"x"}', headers: { "content-type": "application/json" } })).status).toBe(401);
  });
});
