import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { startCallbackReceiver, type ReceivedCallback } from "../helpers/callback-receiver.ts";
import { body, declareType, expectProblem, intake, openWait, readAll } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { advanceClock } from "../helpers/clock.ts";
import { heldOpen } from "../helpers/race-gates.ts";
import { CALLBACK_SECRET, startTestApp, type TestApp } from "../helpers/test-app.ts";

let app: TestApp;
const receivers: Array<{ close(): Promise<void> }> = [];

beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_DELIVERY_MAX_ATTEMPTS: "3" } });
  await declareType(app, "approval");
  await declareType(app, "payment");
});
afterAll(async () => {
  await app.close();
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(respond?: (n: number, cb: ReceivedCallback) => number) {
  const r = await startCallbackReceiver(respond);
  receivers.push(r);
  return r;
}

const verify = (cb: ReceivedCallback) => new Webhook(CALLBACK_SECRET).verify(cb.body, cb.headers as Record<string, string>);
const getWait = async (id: string, query = "") => body(app.api(`/waits/${id}${query}`));
/** Waits in the documented list order: created_at, then id (for waits created in the same millisecond). */
const oldestFirst = (ws: Array<{ id: string; created_at: string }>) =>
  [...ws].sort((a, b) => a.created_at.localeCompare(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map((w) => w.id);
const timed = async <T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> => {
  const started = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - started };
};

describe("POST /runs/{run}/waits", () => {
  it("opens a wait (201) with the documented shape", async () => {
    const { status, body: wait } = await openWait(app, "open-1", {
      signal: "approval",
      key: "scene-2/approval",
      timeout_s: 172800,
      callback_url: "http://engine.invalid:9000/resume",
      metadata: { order_id: "o-17", assignee: "kim" },
    });
    expect(status).toBe(201);
    // The fields API.md names (others, e.g. fires_at for timers, may be added alongside).
    expect(wait).toMatchObject({
      id: expect.stringMatching(/^wt_/),
      run_id: "open-1",
      signal: "approval",
      key: "scene-2/approval",
      status: "waiting",
      created_at: expect.any(String),
      timeout_at: expect.any(String),
      resolved_at: null,
      metadata: { order_id: "o-17", assignee: "kim" },
      callback_url: "http://engine.invalid:9000/resume",
      result: null,
      delivery: { status: "none", attempts: 0, last_error: null },
    });
    for (const field of ["id", "run_id", "signal", "key", "status", "created_at", "timeout_at", "resolved_at", "metadata", "callback_url", "result", "delivery"]) {
      expect(wait).toHaveProperty(field);
    }
    const deadline = Date.parse(wait.timeout_at) - Date.parse(wait.created_at);
    expect(Math.abs(deadline - 172800_000)).toBeLessThan(5_000);
    expect(await getWait(wait.id)).toEqual(wait);
  });

  it("the same run and key again returns the same wait with 200", async () => {
    const first = await openWait(app, "open-key", { signal: "approval", key: "step-1", metadata: { n: 1 } });
    expect(first.status).toBe(201);
    const again = await openWait(app, "open-key", { signal: "approval", key: "step-1", metadata: { n: 1 } });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);

    // Still the same wait once it has been resolved: a replayed workflow step sees what happened.
    expect((await intake(app, "open-key", "approval", '{"ok":true}')).status).toBe(202);
    const replay = await openWait(app, "open-key", { signal: "approval", key: "step-1" });
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ id: first.body.id, status: "received", result: { payload: { ok: true } } });
    const list = await body(app.api("/runs/open-key/waits"));
    expect(list.items).toHaveLength(1);
  });

  it("the same key for another signal name is 409", async () => {
    expect((await openWait(app, "open-key-2", { signal: "approval", key: "k" })).status).toBe(201);
    const res = await app.api("/runs/open-key-2/waits", { method: "POST", json: { signal: "payment", key: "k" } });
    await expectProblem(res, 409);
  });

  it("a second open wait for the same run and signal is 409; after it resolves a new one may follow", async () => {
    const first = await openWait(app, "open-dup", { signal: "approval" });
    expect(first.status).toBe(201);
    const second = await app.api("/runs/open-dup/waits", { method: "POST", json: { signal: "approval", key: "other" } });
    await expectProblem(second, 409);
    // Another signal name in the same run is independent.
    expect((await openWait(app, "open-dup", { signal: "payment" })).status).toBe(201);

    expect((await intake(app, "open-dup", "approval", "{}")).status).toBe(202);
    const third = await openWait(app, "open-dup", { signal: "approval" });
    expect(third.status).toBe(201);
    expect(third.body.id).not.toBe(first.body.id);
    expect(third.body.status).toBe("waiting");
  });

  it("an unknown signal type is 404 and creates nothing", async () => {
    await expectProblem(await app.api("/runs/open-unknown/waits", { method: "POST", json: { signal: "no-such-type" } }), 404);
    await expectProblem(await app.api("/runs/open-unknown"), 404);
    expect((await body(app.api("/runs/open-unknown/waits"))).items).toEqual([]);
  });

  it("a cancelled run is 409", async () => {
    expect((await app.api("/runs/open-cancelled/cancel", { method: "POST", json: { reason: "done" } })).status).toBe(200);
    await expectProblem(await app.api("/runs/open-cancelled/waits", { method: "POST", json: { signal: "approval" } }), 409);
    expect((await body(app.api("/runs/open-cancelled/waits"))).items).toEqual([]);
  });
});

describe("timeouts", () => {
  it("timeout_s fires: the long-poll answers as soon as it times out and a signed signal.timeout callback arrives", async () => {
    const engine = await receiver();
    const { body: wait } = await openWait(app, "timeout-1", { signal: "approval", timeout_s: 600, callback_url: engine.url });
    expect(wait.status).toBe("waiting");
    const held = timed(() => getWait(wait.id, "?wait_s=10"));
    await heldOpen(app);
    await advanceClock(app, 600);
    const { value: after, ms } = await held;
    expect(after.status).toBe("timed_out");
    expect(after.resolved_at).toEqual(expect.any(String));
    expect(after.result).toBeNull();
    expect(ms).toBeLessThan(5_000); // as soon as it times out, well before wait_s
    expect(Date.parse(after.resolved_at)).toBeGreaterThanOrEqual(Date.parse(after.timeout_at)); // the deadline as the clock moved it

    const [cb] = await engine.waitFor(1);
    expect(verify(cb!)).toMatchObject({ type: "signal.timeout", wait: { id: wait.id, status: "timed_out" } });
    expect(cb!.json).toEqual({ id: expect.stringMatching(/^ev_/), type: "signal.timeout", occurred_at: expect.any(String), wait: expect.any(Object) });
    await waitFor("the callback delivered", () => getWait(wait.id), { until: (w) => w.delivery.status === "delivered" });

    // A signal after the timeout finds nothing to resolve.
    const late = await intake(app, "timeout-1", "approval", "{}");
    expect(late.status).toBe(409);
    expect(late.body!.outcome).toBe("rejected_not_waiting");
  });

  it("timeout_at in the past times out at once", async () => {
    const engine = await receiver();
    const { status, body: wait } = await openWait(app, "timeout-past", {
      signal: "approval",
      timeout_at: new Date(Date.now() - 60_000).toISOString(),
      callback_url: engine.url,
    });
    expect(status).toBe(201);
    expect(wait.status).toBe("timed_out");
    const [cb] = await engine.waitFor(1);
    expect(cb!.json).toMatchObject({ type: "signal.timeout", wait: { id: wait.id, status: "timed_out" } });
    // The run is free for the next wait with this name.
    expect((await openWait(app, "timeout-past", { signal: "approval" })).status).toBe(201);
  });

  it("timeout_at with an offset is honoured", async () => {
    const at = new Date(Date.now() + 3_600_000);
    const offset = new Date(at.getTime() + 2 * 3_600_000).toISOString().replace("Z", "+02:00");
    const { body: wait } = await openWait(app, "timeout-offset", { signal: "approval", timeout_at: offset });
    expect(Math.abs(Date.parse(wait.timeout_at) - at.getTime())).toBeLessThan(1_000);
  });

  it("no timeout waits until cancelled (timeout_at null)", async () => {
    const { body: wait } = await openWait(app, "timeout-none", { signal: "approval" });
    expect(wait.timeout_at).toBeNull();
  });
});

describe("GET /waits/{id}?wait_s= (long-poll)", () => {
  it("answers as soon as a signal arrives from another request while it is held", async () => {
    const { body: wait } = await openWait(app, "poll-1", { signal: "approval" });
    const held = timed(() => getWait(wait.id, "?wait_s=20"));
    await heldOpen(app); // the long-poll is parked
    const sentAt = performance.now();
    const sent = await intake(app, "poll-1", "approval", '{"approved":true}');
    expect(sent.status).toBe(202);
    const { value, ms } = await held;
    expect(value).toMatchObject({ status: "received", result: { signal_id: sent.body!.signal_id, sequence: 1, payload: { approved: true } } });
    expect(ms).toBeLessThan(5_000); // well before wait_s
    expect(performance.now() - sentAt).toBeLessThan(3_000);
    expect(app.changes.size).toBe(0);
  });

  it("answers a cancel from another request while held", async () => {
    const { body: wait } = await openWait(app, "poll-cancel", { signal: "approval" });
    const held = timed(() => getWait(wait.id, "?wait_s=20"));
    await heldOpen(app);
    expect((await app.api(`/waits/${wait.id}/cancel`, { method: "POST" })).status).toBe(200);
    const { value, ms } = await held;
    expect(value.status).toBe("cancelled");
    expect(ms).toBeLessThan(5_000);
  });

  it("with no change answers after about wait_s, still waiting", async () => {
    const { body: wait } = await openWait(app, "poll-idle", { signal: "approval" });
    const { value, ms } = await timed(() => getWait(wait.id, "?wait_s=1"));
    expect(value.status).toBe("waiting");
    expect(ms).toBeGreaterThanOrEqual(950);
    expect(ms).toBeLessThan(4_000);
  });

  it("answers at once when the wait has already left waiting, or without wait_s", async () => {
    const { body: wait } = await openWait(app, "poll-done", { signal: "approval" });
    const plain = await timed(() => getWait(wait.id));
    expect(plain.value.status).toBe("waiting");
    expect(plain.ms).toBeLessThan(1_500);
    await intake(app, "poll-done", "approval", "{}");
    const { value, ms } = await timed(() => getWait(wait.id, "?wait_s=30"));
    expect(value.status).toBe("received");
    expect(ms).toBeLessThan(1_500);
  });

  it("an unknown wait id is 404, also with wait_s", async () => {
    await expectProblem(await app.api("/waits/wt_nope"), 404);
    await expectProblem(await app.api("/waits/wt_nope?wait_s=5"), 404);
  });

  it("wait_s above 60 is 400", async () => {
    const { body: wait } = await openWait(app, "poll-too-long", { signal: "approval" });
    await expectProblem(await app.api(`/waits/${wait.id}?wait_s=61`), 400);
    await expectProblem(await app.api(`/waits/${wait.id}?wait_s=-1`), 400);
  });
});

describe("POST /waits/{id}/cancel", () => {
  it("cancels (200), a second cancel is 409, and a signed signal.cancelled callback arrives", async () => {
    const engine = await receiver();
    const { body: wait } = await openWait(app, "cancel-1", { signal: "approval", callback_url: engine.url, timeout_s: 3600 });
    const res = await app.api(`/waits/${wait.id}/cancel`, { method: "POST" });
    expect(res.status).toBe(200);
    const cancelled = await body(res);
    expect(cancelled).toMatchObject({ id: wait.id, status: "cancelled", resolved_at: expect.any(String), result: null });

    const again = await expectProblem(await app.api(`/waits/${wait.id}/cancel`, { method: "POST" }), 409);
    expect(again.detail).toContain("cancelled");

    const [cb] = await engine.waitFor(1);
    expect(verify(cb!)).toMatchObject({ type: "signal.cancelled", wait: { id: wait.id, status: "cancelled" } });

    // A signal after the cancel is not taken.
    expect((await intake(app, "cancel-1", "approval", "{}")).body!.outcome).toBe("rejected_not_waiting");
  });

  it("cancelling a received wait is 409 and changes nothing", async () => {
    const { body: wait } = await openWait(app, "cancel-received", { signal: "approval" });
    await intake(app, "cancel-received", "approval", '{"x":1}');
    await expectProblem(await app.api(`/waits/${wait.id}/cancel`, { method: "POST" }), 409);
    expect(await getWait(wait.id)).toMatchObject({ status: "received", result: { payload: { x: 1 } } });
  });

  it("an unknown wait is 404", async () => {
    await expectProblem(await app.api("/waits/wt_unknown/cancel", { method: "POST" }), 404);
  });
});

describe("resume delivery and POST /waits/{id}/redeliver", () => {
  it("a 400 answer fails the delivery after 1 attempt; redeliver sends it again with the same webhook-id", async () => {
    let answer = 400;
    const engine = await receiver(() => answer);
    const { body: wait } = await openWait(app, "deliver-400", { signal: "approval", callback_url: engine.url });
    expect((await intake(app, "deliver-400", "approval", '{"approved":true}')).status).toBe(202);
    const [first] = await engine.waitFor(1);
    const failed = await waitFor("the delivery to end", () => getWait(wait.id), { until: (w) => w.delivery.status !== "pending" });
    expect(failed.delivery).toEqual({ status: "failed", attempts: 1, last_error: expect.stringContaining("400") });
    expect(engine.received).toHaveLength(1); // permanent: no retry

    answer = 204;
    const res = await app.api(`/waits/${wait.id}/redeliver`, { method: "POST" });
    expect(res.status).toBe(202);
    expect((await body(res)).delivery.status).toBe("pending");
    const [, second] = await engine.waitFor(2);
    expect(second!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);
    expect(verify(second!)).toMatchObject({ type: "signal.received", wait: { id: wait.id, status: "received", result: { payload: { approved: true } } } });
    const delivered = await waitFor("the callback delivered", () => getWait(wait.id), { until: (w) => w.delivery.status === "delivered" });
    // Attempts go on counting across a redelivery (GET /waits/{id}/deliveries lists both).
    expect(delivered.delivery).toEqual({ status: "delivered", attempts: 2, last_error: null });
  });

  it("a redirect is an answer, not followed: a 302 fails the delivery after 1 attempt", async () => {
    const elsewhere = await receiver(() => 204);
    const redirecting = http.createServer((req, res) => req.resume().on("end", () => res.writeHead(302, { location: elsewhere.url }).end()));
    await new Promise<void>((r) => redirecting.listen(0, "127.0.0.1", r));
    receivers.push({ close: () => new Promise<void>((r) => redirecting.close(() => r())) });
    const url = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/resume`;
    const { body: wait } = await openWait(app, "deliver-302", { signal: "approval", callback_url: url });
    await intake(app, "deliver-302", "approval", "{}");
    const failed = await waitFor("the delivery to end", () => getWait(wait.id), { until: (w) => w.delivery.status !== "pending" });
    expect(failed.delivery).toEqual({ status: "failed", attempts: 1, last_error: "HTTP 302" });
    expect(elsewhere.received).toHaveLength(0);
  });

  it("a refused connection is retried with the error recorded, then failed", async () => {
    const closed = await startCallbackReceiver(() => 204);
    const url = closed.url;
    await closed.close(); // nothing listens there any more
    const { body: wait } = await openWait(app, "deliver-refused", { signal: "approval", callback_url: url });
    await intake(app, "deliver-refused", "approval", "{}");
    const failed = await waitFor("the delivery to fail", () => getWait(wait.id), { until: (w) => w.delivery.status === "failed", timeoutMs: 20_000 });
    expect(failed.delivery).toEqual({ status: "failed", attempts: 3, last_error: "request failed: ECONNREFUSED" });
  });

  it("a 503 answer is retried up to SIGNALBOX_DELIVERY_MAX_ATTEMPTS, then failed; redeliver delivers it", async () => {
    let answer = 503;
    const engine = await receiver(() => answer);
    const { body: wait } = await openWait(app, "deliver-503", { signal: "approval", callback_url: engine.url });
    await intake(app, "deliver-503", "approval", "{}");
    await engine.waitFor(3);
    const failed = await waitFor("the delivery to fail", () => getWait(wait.id), { until: (w) => w.delivery.status === "failed" });
    expect(failed.delivery).toEqual({ status: "failed", attempts: 3, last_error: expect.stringContaining("503") });
    const ids = new Set(engine.received.map((cb) => cb.headers["webhook-id"]));
    expect(ids.size).toBe(1);
    for (const cb of engine.received) expect(verify(cb)).toMatchObject({ type: "signal.received" });
    expect(engine.received).toHaveLength(3);

    answer = 200;
    expect((await app.api(`/waits/${wait.id}/redeliver`, { method: "POST" })).status).toBe(202);
    const all = await engine.waitFor(4);
    expect(all[3]!.headers["webhook-id"]).toBe(all[0]!.headers["webhook-id"]);
    const delivered = await waitFor("the callback delivered", () => getWait(wait.id), { until: (w) => w.delivery.status === "delivered" });
    expect(delivered.delivery.attempts).toBe(4); // the redelivery's attempt is the fourth
  });

  it("redeliver is 409 while the wait is waiting or has no callback, 404 for an unknown wait", async () => {
    const engine = await receiver();
    const { body: waiting } = await openWait(app, "redeliver-409", { signal: "approval", callback_url: engine.url });
    await expectProblem(await app.api(`/waits/${waiting.id}/redeliver`, { method: "POST" }), 409);
    const { body: bare } = await openWait(app, "redeliver-409", { signal: "payment" });
    await app.api(`/waits/${bare.id}/cancel`, { method: "POST" });
    await expectProblem(await app.api(`/waits/${bare.id}/redeliver`, { method: "POST" }), 409);
    await expectProblem(await app.api("/waits/wt_unknown/redeliver", { method: "POST" }), 404);
    expect(engine.received).toHaveLength(0);
  });

  it("a wait without callback_url shows delivery none after it resolves", async () => {
    const { body: wait } = await openWait(app, "no-callback", { signal: "approval" });
    await intake(app, "no-callback", "approval", "{}");
    expect((await getWait(wait.id)).delivery).toEqual({ status: "none", attempts: 0, last_error: null });
  });
});

describe("GET /runs/{run}/waits (ListWaitingSignals)", () => {
  it("lists a run's waits oldest first, and ?status=waiting only the open ones", async () => {
    await declareType(app, "third");
    const a = (await openWait(app, "list-run", { signal: "approval" })).body;
    const b = (await openWait(app, "list-run", { signal: "payment" })).body;
    const c = (await openWait(app, "list-run", { signal: "third" })).body;
    await openWait(app, "list-run-other", { signal: "approval" });
    await intake(app, "list-run", "payment", "{}");
    await app.api(`/waits/${c.id}/cancel`, { method: "POST" });

    const order = oldestFirst([a, b, c]);
    const all = await body(app.api("/runs/list-run/waits"));
    expect(all.items.map((w: { id: string }) => w.id)).toEqual(order);
    expect(all.next_cursor).toBeNull();
    const waiting = await body(app.api("/runs/list-run/waits?status=waiting"));
    expect(waiting.items.map((w: { id: string }) => w.id)).toEqual([a.id]);
    const received = await body(app.api("/runs/list-run/waits?status=received"));
    expect(received.items).toEqual([expect.objectContaining({ id: b.id, status: "received" })]);
    const cancelled = await body(app.api("/runs/list-run/waits?status=cancelled"));
    expect(cancelled.items.map((w: { id: string }) => w.id)).toEqual([c.id]);

    const paged = await readAll<{ id: string }>(app, "/runs/list-run/waits", 1);
    expect(paged.items.map((w) => w.id)).toEqual(order);
  });

  it("an unknown run has no waits", async () => {
    expect(await body(app.api("/runs/never-seen/waits?status=waiting"))).toEqual({ items: [], next_cursor: null });
  });
});

describe("GET /waits (FindRunsWaitingFor)", () => {
  it("filters by signal, status and metadata, oldest first, and pages with limit=2 without repeats or gaps", async () => {
    await declareType(app, "pending-approval");
    const kimWaits: Array<{ id: string; created_at: string }> = [];
    for (let i = 0; i < 5; i++) {
      kimWaits.push((await openWait(app, `find-${i}`, { signal: "pending-approval", metadata: { assignee: "kim", order: `o-${i}` } })).body);
      // decoys: another assignee, another signal, and kim's wait that is no longer waiting
      await openWait(app, `find-lee-${i}`, { signal: "pending-approval", metadata: { assignee: "lee" } });
    }
    const kim = oldestFirst(kimWaits);
    await openWait(app, "find-0", { signal: "approval", metadata: { assignee: "kim" } });
    const done = (await openWait(app, "find-done", { signal: "pending-approval", metadata: { assignee: "kim" } })).body;
    await intake(app, "find-done", "pending-approval", "{}");

    const q = "/waits?signal=pending-approval&status=waiting&metadata.assignee=kim";
    const one = await body(app.api(q));
    expect(one.items.map((w: { id: string }) => w.id)).toEqual(kim);
    expect(one.items.every((w: { metadata: { assignee: string } }) => w.metadata.assignee === "kim")).toBe(true);

    const first = await body(app.api(`${q}&limit=2`));
    expect(first.items).toHaveLength(2);
    expect(first.next_cursor).toEqual(expect.any(String));
    const paged = await readAll<{ id: string }>(app, q, 2);
    expect(paged.pages).toBe(3);
    expect(paged.items.map((w) => w.id)).toEqual(kim);

    // Stable under inserts: a wait added while paging comes last, nothing repeats.
    const p1 = await body(app.api(`${q}&limit=2`));
    const late = (await openWait(app, "find-late", { signal: "pending-approval", metadata: { assignee: "kim" } })).body.id;
    const p2 = await body(app.api(`${q}&limit=2&cursor=${p1.next_cursor}`));
    const p3 = await body(app.api(`${q}&limit=2&cursor=${p2.next_cursor}`));
    expect([...p1.items, ...p2.items, ...p3.items].map((w: { id: string }) => w.id)).toEqual([...kim, late]);
    expect(p3.next_cursor).toBeNull();

    // Several metadata filters must all match; no metadata filter matches all.
    const both = await body(app.api(`${q}&metadata.order=o-3`));
    expect(both.items.map((w: { id: string }) => w.id)).toEqual([kimWaits[3]!.id]);
    // Open and resolved waits are listed by different statements (no join to a resolving signal
    // for open ones), whichever is asked for first: each item is the wait as GET shows it.
    const open = (await body(app.api("/waits?signal=pending-approval&status=waiting&limit=500"))).items;
    expect(open).toHaveLength(11);
    expect(open[0]).toEqual(await body(app.api(`/waits/${open[0].id}`)));
    const received = await body(app.api("/waits?signal=pending-approval&status=received"));
    expect(received.items.map((w: { id: string }) => w.id)).toEqual([done.id]);
    expect(received.items[0].result).toEqual(expect.objectContaining({ sequence: expect.any(Number), payload: {} }));
    expect(received.items).toEqual([await body(app.api(`/waits/${done.id}`))]);
  });

  it("deadline_before finds what is about to time out; created_before what has waited too long", async () => {
    await declareType(app, "deadlines");
    const soon = (await openWait(app, "dl-1", { signal: "deadlines", timeout_s: 600 })).body;
    const later = (await openWait(app, "dl-2", { signal: "deadlines", timeout_s: 86400 })).body;
    const never = (await openWait(app, "dl-3", { signal: "deadlines" })).body;

    const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
    const dueSoon = await body(app.api(`/waits?signal=deadlines&status=waiting&deadline_before=${inAnHour}`));
    expect(dueSoon.items.map((w: { id: string }) => w.id)).toEqual([soon.id]);
    const inTwoDays = encodeURIComponent(new Date(Date.now() + 2 * 86_400_000).toISOString().replace("Z", "+00:00"));
    const dueLater = await body(app.api(`/waits?signal=deadlines&deadline_before=${inTwoDays}`));
    expect(dueLater.items.map((w: { id: string }) => w.id)).toEqual([soon.id, later.id]);

    const old = await body(app.api(`/waits?signal=deadlines&created_before=${encodeURIComponent(never.created_at)}`));
    expect(old.items.map((w: { id: string }) => w.id)).toEqual([soon.id, later.id]);
    const none = await body(app.api(`/waits?signal=deadlines&created_before=${encodeURIComponent(soon.created_at)}`));
    expect(none.items).toEqual([]);
  });

  it("deadline_before pages the same whether few open waits meet it (gathered by deadline) or many (over 500)", async () => {
    await declareType(app, "deadline-pages");
    const specs = Array.from({ length: 540 }, (_, i) => ({ run: `dp-${i}`, timeout_s: i % 3 === 0 ? 600 : 86_400 }));
    const opened: Array<{ id: string; created_at: string; timeout_s: number }> = [];
    for (let i = 0; i < specs.length; i += 30) {
      const chunk = specs.slice(i, i + 30);
      const bodies = await Promise.all(chunk.map((s) => openWait(app, s.run, { signal: "deadline-pages", timeout_s: s.timeout_s }, 201)));
      bodies.forEach((b, k) => opened.push({ ...b.body, timeout_s: chunk[k]!.timeout_s }));
    }
    // A resolved wait keeps its deadline, and is not pending.
    const resolved = opened.find((w) => w.timeout_s === 600)!;
    expect((await intake(app, (await getWait(resolved.id)).run_id, "deadline-pages", "{}")).status).toBe(202);
    const open = opened.filter((w) => w.id !== resolved.id);

    const q = (before: number) => `/waits?signal=deadline-pages&status=waiting&deadline_before=${encodeURIComponent(new Date(Date.now() + before).toISOString())}`;
    const soon = await readAll<{ id: string }>(app, q(3_600_000), 50); // 179: few
    expect(soon.items.map((w) => w.id)).toEqual(oldestFirst(open.filter((w) => w.timeout_s === 600)));
    const all = await readAll<{ id: string }>(app, q(2 * 86_400_000), 50); // 539: many
    expect(all.items.map((w) => w.id)).toEqual(oldestFirst(open));
    // A page boundary inside the few: the cursor goes on where the page ended.
    const small = await readAll<{ id: string }>(app, q(3_600_000), 7);
    expect(small.items.map((w) => w.id)).toEqual(soon.items.map((w) => w.id));
  });

  it("bad filters are 400", async () => {
    await expectProblem(await app.api("/waits?deadline_before=tomorrow"), 400);
    await expectProblem(await app.api("/waits?created_before=2024-13-45T00:00:00Z"), 400);
    await expectProblem(await app.api("/waits?status=pending"), 400);
    await expectProblem(await app.api("/waits?signal=-bad"), 400);
    await expectProblem(await app.api("/waits?metadata.assignee=kim&metadata.assignee=lee"), 400);
  });
});
