import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { expectProblem } from "../helpers/http.ts";
import { heldOpen } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver();
  await app.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } });
});
afterAll(async () => {
  await app.close();
  await engine.close();
});

const post = async (path: string, json?: unknown) => {
  const res = await app.api(path, { method: "POST", ...(json === undefined ? {} : { json }) });
  return { status: res.status, body: (await res.json()) as any };
};
const intake = async (run: string, payload: string, headers: Record<string, string> = {}) => {
  const res = await fetch(`${app.baseUrl}/signals/${run}/kept`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: payload });
  return { status: res.status, body: (await res.json()) as any };
};
const eventTypes = async (run: string) =>
  ((await (await app.api(`/runs/${run}/events?limit=500`)).json()) as any).items.map((e: { type: string }) => e.type);

describe("pause, resume and checkpoints", () => {
  it("a checkpoint proceeds at once when the run is not paused", async () => {
    const started = Date.now();
    expect(await post("/runs/free-run/checkpoints/pre_routing?wait_s=5")).toEqual({ status: 200, body: { proceed: true } });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it("pause shows in the control state; a checkpoint holds and answers the moment the run resumes", async () => {
    const paused = await post("/runs/ctl-1/pause", { reason: "provider outage", by: "kim" });
    expect(paused.status).toBe(200);
    expect(paused.body.control).toMatchObject({ is_paused: true, pause_reason: "provider outage", paused_by: "kim", is_cancelled: false });
    expect(paused.body.control.paused_at).toEqual(expect.any(String));

    const held = post("/runs/ctl-1/checkpoints/pre_routing?wait_s=20");
    await heldOpen(app);
    const resumedAt = Date.now();
    expect((await post("/runs/ctl-1/resume", { by: "lee" })).body.control).toMatchObject({ is_paused: false, paused_at: null, pause_reason: null });
    expect((await held).body).toEqual({ proceed: true });
    expect(Date.now() - resumedAt).toBeLessThan(1000);
  });

  it("a checkpoint answers proceed: false after wait_s while still paused", async () => {
    await post("/runs/ctl-2/pause", {});
    const started = Date.now();
    expect(await post("/runs/ctl-2/checkpoints/step?wait_s=0.3")).toEqual({ status: 200, body: { proceed: false } });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
  });

  it("records run.paused once per pause, with the checkpoint name, across repeated cycles", async () => {
    for (let cycle = 0; cycle < 3; cycle++) {
      await post("/runs/ctl-3/pause", { reason: `cycle ${cycle}` });
      await post("/runs/ctl-3/pause", { reason: "again" }); // pausing a paused run changes nothing
      await post(`/runs/ctl-3/checkpoints/cp-${cycle}?wait_s=0.05`);
      await post(`/runs/ctl-3/checkpoints/cp-${cycle}b?wait_s=0.05`);
      await post("/runs/ctl-3/resume", {});
      expect((await post(`/runs/ctl-3/checkpoints/after-${cycle}`)).body).toEqual({ proceed: true });
    }
    const events = ((await (await app.api("/runs/ctl-3/events?limit=500")).json()) as any).items;
    expect(events.map((e: { type: string }) => e.type)).toEqual(Array(3).fill(["run.pausing", "run.paused", "run.resumed"]).flat());
    expect(events.filter((e: { type: string }) => e.type === "run.paused").map((e: any) => e.data.checkpoint)).toEqual(["cp-0", "cp-1", "cp-2"]);
  });

  it("cancel makes checkpoints 409, including one held while paused", async () => {
    await post("/runs/ctl-4/pause", {});
    const held = app.api("/runs/ctl-4/checkpoints/step?wait_s=20", { method: "POST" });
    await heldOpen(app);
    const cancelled = await post("/runs/ctl-4/cancel", { reason: "user abort", by: "kim" });
    expect(cancelled.body.control).toMatchObject({ is_cancelled: true, is_paused: false, cancel_reason: "user abort", cancelled_by: "kim" });
    await expectProblem(await held, 409);
    await expectProblem(await app.api("/runs/ctl-4/checkpoints/next", { method: "POST" }), 409);
    await expectProblem(await app.api("/runs/ctl-4/pause", { method: "POST" }), 409);
    expect(await eventTypes("ctl-4")).toEqual(["run.pausing", "run.paused", "run.cancelling", "run.cancelled"]);
  });

  it("refuses a bad checkpoint name or wait_s with 400", async () => {
    await expectProblem(await app.api("/runs/ctl-5/checkpoints/-bad?wait_s=1", { method: "POST" }), 400);
    await expectProblem(await app.api("/runs/ctl-5/checkpoints/ok?wait_s=61", { method: "POST" }), 400);
    await expectProblem(await app.api("/runs/ctl-5/pause", { method: "POST", json: { reason: 5 } }), 400);
  });
});

describe("children", () => {
  it("pause, resume and cancel reach every descendant, recursively; cancel cancels their waits", async () => {
    expect((await post("/runs/tree-root/children", { run_id: "tree-a" })).body.children).toEqual(["tree-a"]);
    await post("/runs/tree-a/children", { run_id: "tree-a1" });
    await post("/runs/tree-root/children", { run_id: "tree-b" });
    expect((await (await app.api("/runs/tree-a1")).json() as any).parent_run_id).toBe("tree-a");

    await post("/runs/tree-root/pause", { reason: "maintenance" });
    for (const run of ["tree-root", "tree-a", "tree-a1", "tree-b"]) {
      expect(((await (await app.api(`/runs/${run}`)).json()) as any).control.is_paused, run).toBe(true);
    }
    const heldLeaf = post("/runs/tree-a1/checkpoints/leaf?wait_s=20");
    await heldOpen(app);
    await post("/runs/tree-root/resume", {});
    expect((await heldLeaf).body).toEqual({ proceed: true });

    const wait = (await post("/runs/tree-a1/waits", { signal: "approval", callback_url: engine.url })).body;
    await post("/runs/tree-root/cancel", { reason: "abandoned" });
    for (const run of ["tree-root", "tree-a", "tree-a1", "tree-b"]) {
      expect(((await (await app.api(`/runs/${run}`)).json()) as any).status, run).toBe("cancelled");
    }
    expect(((await (await app.api(`/waits/${wait.id}`)).json()) as any).status).toBe("cancelled");
    const callbacks = await engine.waitFor(1);
    expect(callbacks.find((cb) => cb.json.wait.id === wait.id)?.json.type).toBe("signal.cancelled");
    expect(await eventTypes("tree-a1")).toEqual(["run.pausing", "run.paused", "run.resumed", "signal.waiting", "run.cancelling", "signal.cancelled", "run.cancelled"]);
    const rejected = await fetch(`${app.baseUrl}/signals/tree-b/approval`, { method: "POST", body: "{}" });
    expect(((await rejected.json()) as any).outcome).toBe("rejected_not_active");
  });

  it("refuses cycles and a second parent; DELETE unregisters", async () => {
    await post("/runs/cyc-1/children", { run_id: "cyc-2" });
    await post("/runs/cyc-2/children", { run_id: "cyc-3" });
    await expectProblem(await app.api("/runs/cyc-3/children", { method: "POST", json: { run_id: "cyc-1" } }), 409);
    await expectProblem(await app.api("/runs/cyc-1/children", { method: "POST", json: { run_id: "cyc-1" } }), 409);
    await expectProblem(await app.api("/runs/other-parent/children", { method: "POST", json: { run_id: "cyc-2" } }), 409);
    expect((await post("/runs/cyc-1/children", { run_id: "cyc-2" })).status).toBe(200); // same parent again: fine

    const removed = await app.api("/runs/cyc-1/children?run_id=cyc-2", { method: "DELETE" });
    expect(((await removed.json()) as any).children).toEqual([]);
    await expectProblem(await app.api("/runs/cyc-1/children?run_id=cyc-2", { method: "DELETE" }), 404);
    await post("/runs/cyc-1/pause", {});
    expect(((await (await app.api("/runs/cyc-2")).json()) as any).control.is_paused).toBe(false);
  });

  it("two registrations at once never close a cycle (B under A and D under C, then C under B and A under D at once; 30 rounds)", async () => {
    const cycles: string[] = [];
    for (let round = 0; round < 30; round++) {
      const [a, b, c, d] = ["a", "b", "c", "d"].map((x) => `cycle${round}-${x}`) as [string, string, string, string];
      expect((await post(`/runs/${a}/children`, { run_id: b })).status).toBe(200);
      expect((await post(`/runs/${c}/children`, { run_id: d })).status).toBe(200);
      const [first, second] = await Promise.all([post(`/runs/${b}/children`, { run_id: c }), post(`/runs/${d}/children`, { run_id: a })]);
      if (first.status === 200 && second.status === 200) cycles.push(`round ${round}: ${a} > ${b} > ${c} > ${d} > ${a}`);
      else expect([first.status, second.status].sort()).toEqual([200, 409]);
    }
    expect(cycles).toEqual([]);
  });

  it("a child registered under a paused parent starts paused", async () => {
    await post("/runs/late-parent/pause", { reason: "hold" });
    await post("/runs/late-parent/children", { run_id: "late-child" });
    expect(((await (await app.api("/runs/late-child")).json()) as any).control).toMatchObject({ is_paused: true, pause_reason: "hold" });
  });
});

describe("a continued run", () => {
  it("refuses pause, resume and cancel with 409 naming the run it continued as, and changes nothing", async () => {
    expect((await post("/runs/ctl-old/continue", { run_id: "ctl-new" })).status).toBe(200);
    for (const verb of ["pause", "resume", "cancel"]) {
      const res = await post(`/runs/ctl-old/${verb}`, { reason: "stop" });
      expect(res, verb).toMatchObject({ status: 409, body: { continued_as: "ctl-new" } });
    }
    const old = await (await app.api("/runs/ctl-old")).json();
    expect(old).toMatchObject({ status: "continued", control: { is_paused: false, is_cancelled: false } });
    expect(((await (await app.api("/runs/ctl-new")).json()) as { control: unknown }).control).toMatchObject({ is_paused: false, is_cancelled: false });
  });

  it("keeps behind a buffered signal whose idempotency key an older run of the target's chain holds: one key is one signal in a chain", async () => {
    await app.api("/signal-types/kept", { method: "PUT", json: { auth: { scheme: "none" }, buffer_ttl_s: 600 } });
    const key = { "idempotency-key": "k-chain" };
    // ik-b1 took a signal with the key, then was continued as ik-b2: the signal stays on ik-b1.
    await post("/runs/ik-b1/waits", { signal: "kept" });
    const taken = await intake("ik-b1", '{"from":"b1"}', key);
    expect(taken.body).toMatchObject({ outcome: "received", run_id: "ik-b1" });
    expect((await post("/runs/ik-b1/continue", { run_id: "ik-b2" })).status).toBe(200);
    // ik-z0 buffered its own signal with the same key, then continues as ik-b1 (newest: ik-b2).
    const buffered = await intake("ik-z0", '{"from":"a0"}', key);
    expect(buffered.body).toMatchObject({ outcome: "buffered", run_id: "ik-z0" });
    expect((await post("/runs/ik-z0/continue", { run_id: "ik-b1" })).status).toBe(200);

    // A retry addressed to ik-b1 reads the keys of ik-b1 and ik-b2: it must find ik-b1's signal alone.
    expect(await intake("ik-b1", '{"from":"b1"}', key)).toMatchObject({ status: 200, body: { outcome: "duplicate", signal_id: taken.body!.signal_id } });
    // ...and one addressed to ik-z0 (its keys, then ik-b1's and ik-b2's) its own signal, not ik-b1's.
    expect(await intake("ik-z0", '{"from":"a0"}', key)).toMatchObject({ status: 200, body: { outcome: "duplicate", signal_id: buffered.body!.signal_id } });
    const ofB2 = ((await (await app.api("/runs/ik-b2/signals")).json()) as any).items.map((s: { id: string }) => s.id);
    expect(ofB2).not.toContain(buffered.body!.signal_id);
    const continued = ((await (await app.api("/runs/ik-z0/events?limit=500")).json()) as any).items.find((e: { type: string }) => e.type === "run.continued");
    expect(continued.data.kept_signals).toEqual([{ signal_id: buffered.body!.signal_id, signal: "kept", reason: "idempotency_key_taken" }]);
  });
});
