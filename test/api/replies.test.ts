import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonAnswer, startCallbackReceiver, type CallbackAnswer } from "../helpers/callback-receiver.ts";
import { declareType, expectProblem, intake, openWait } from "../helpers/http.ts";
import { advanceClock } from "../helpers/clock.ts";
import { drainJobs, heldOpen } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Replies: a resume callback's JSON answer is stored on the wait and on the signal that resolved
// it, and a sender may hold its intake request (or GET /signals/{id}) until it is known.

let app: TestApp;
/** What the engine answers next, per wait id (default 204, no body). */
const answers = new Map<string, (n: number) => CallbackAnswer | number | Promise<CallbackAnswer | number>>();
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;

beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver((n, cb) => answers.get(cb.json.wait.id)?.(n) ?? 204);
  await declareType(app, "approval");
  await declareType(app, "later", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
});

let runs = 0;
/** A run with an open wait for `approval` calling back the engine (or none), answering `answer`. */
async function waitingRun(answer?: (n: number) => CallbackAnswer | number | Promise<CallbackAnswer | number>, spec: Record<string, unknown> = {}) {
  const run = `reply-${++runs}`;
  const { body: wait } = await openWait(app, run, { signal: "approval", callback_url: engine.url, ...spec }, 201);
  if (answer) answers.set(wait.id as string, answer);
  return { run, waitId: wait.id as string };
}

const send = (run: string, query = "", payload: unknown = { approved: true }, headers: Record<string, string> = {}, signal = "approval") =>
  intake(app, run, signal + query, JSON.stringify(payload), headers);

async function getJson(path: string) {
  const res = await app.api(path);
  const text = await res.text();
  expect(res.status, `${path}: ${text}`).toBe(200);
  return JSON.parse(text) as Record<string, any>;
}

describe("POST /signals/{run}/{signal}?wait_s: the sender waits for the callback's reply", () => {
  it("answers 200 with the callback's JSON answer, stored on the wait and on the signal", async () => {
    const { run, waitId } = await waitingRun(() => jsonAnswer({ order_status: "approved", next: ["ship"] }));
    const res = await send(run, "?wait_s=10");
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ outcome: "received", wait_id: waitId, sequence: 1, reply: { order_status: "approved", next: ["ship"] }, reply_pending: false, delivery_status: "delivered" });

    const wait = await getJson(`/waits/${waitId}`);
    expect(wait.reply).toEqual({ order_status: "approved", next: ["ship"] });
    expect(Date.parse(wait.replied_at)).toBeGreaterThanOrEqual(Date.parse(wait.resolved_at));
    const signal = await getJson(`/signals/${res.body!.signal_id}`);
    expect(signal).toMatchObject({ id: res.body!.signal_id, outcome: "received", wait_id: waitId, reply: { order_status: "approved", next: ["ship"] }, reply_pending: false, delivery_status: "delivered" });
    const attempts = await getJson(`/waits/${waitId}/deliveries`);
    expect(attempts.items.map((a: any) => [a.outcome, a.error])).toEqual([["delivered", null]]);
  });

  it("answers 200 with reply null when the callback's answer has no JSON body (204, or JSON-looking text/plain)", async () => {
    for (const answer of [() => 204, (): CallbackAnswer => ({ status: 200, headers: { "content-type": "text/plain" }, body: '{"not":"a reply"}' })]) {
      const { run, waitId } = await waitingRun(answer);
      const res = await send(run, "?wait_s=10");
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ outcome: "received", reply: null, reply_pending: false, delivery_status: "delivered" });
      const wait = await getJson(`/waits/${waitId}`);
      expect(wait.reply).toBeNull();
      expect(wait.replied_at).not.toBeNull();
      expect(wait.delivery.last_error).toBeNull();
    }
  });

  it("takes application/json with parameters, and any JSON value", async () => {
    for (const value of [42, "yes", [1, { a: null }], { nested: { deep: true } }]) {
      const { run } = await waitingRun(() => ({ status: 201, headers: { "content-type": "Application/JSON; charset=utf-8" }, body: JSON.stringify(value) }));
      const res = await send(run, "?wait_s=10");
      expect(res.status, res.text).toBe(200);
      expect(res.body!.reply).toEqual(value);
    }
  });

  it("answers 202 with reply_pending when wait_s passes first; GET /signals/{id}?wait_s then gets the reply", async () => {
    let answer!: () => void;
    const answered = new Promise<void>((r) => (answer = r));
    const { run } = await waitingRun(async () => {
      await answered;
      return jsonAnswer({ late: true });
    });
    const started = performance.now();
    const res = await send(run, "?wait_s=0.5");
    expect(performance.now() - started).toBeGreaterThanOrEqual(450);
    expect(res.status, res.text).toBe(202);
    expect(res.body).toMatchObject({ outcome: "received", reply: null, reply_pending: true, delivery_status: "pending" });

    const id = res.body!.signal_id as string;
    const polled = app.api(`/signals/${id}?wait_s=10`);
    await heldOpen(app);
    answer();
    const signal = await (await polled).json();
    expect(signal).toMatchObject({ id, reply: { late: true }, reply_pending: false, delivery_status: "delivered" });
  });

  it("answers at once when no reply will come: a wait without callback_url, a delivery that failed", async () => {
    const run = `reply-${++runs}`;
    await openWait(app, run, { signal: "approval" }, 201);
    let started = performance.now();
    const none = await send(run, "?wait_s=30");
    expect(performance.now() - started).toBeLessThan(2000);
    expect(none.status, none.text).toBe(202);
    expect(none.body).toMatchObject({ outcome: "received", reply: null, reply_pending: false, delivery_status: "none" });

    const failing = await waitingRun(() => jsonAnswer({ error: "no such order" }, 400));
    started = performance.now();
    const failed = await send(failing.run, "?wait_s=30");
    expect(performance.now() - started).toBeLessThan(5000);
    expect(failed.status, failed.text).toBe(202);
    expect(failed.body).toMatchObject({ outcome: "received", reply: null, reply_pending: false, delivery_status: "failed" });
    expect((await getJson(`/waits/${failing.waitId}`)).reply).toBeNull(); // a 4xx's body is no reply
  });

  it("holds a buffered signal until a wait takes it and its callback is delivered", async () => {
    const run = `reply-${++runs}`;
    const held = send(run, "?wait_s=20", { approved: true }, {}, "later");
    await heldOpen(app);
    const { body: wait } = await openWait(app, run, { signal: "later", callback_url: engine.url }, 201);
    answers.set(wait.id, () => jsonAnswer({ took: "buffered" }));
    expect(wait.status).toBe("received"); // consumed at once
    const res = await held;
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ outcome: "buffered", wait_id: wait.id, reply: { took: "buffered" }, reply_pending: false });
  });

  it("a duplicate with wait_s answers as its original: the reply once known (200)", async () => {
    const { run } = await waitingRun(() => jsonAnswer({ first: true }));
    const first = await send(run, "?wait_s=10", { approved: true }, { "idempotency-key": "k1" });
    expect(first.status, first.text).toBe(200);
    const again = await send(run, "?wait_s=10", { approved: true }, { "idempotency-key": "k1" });
    expect(again.status, again.text).toBe(200);
    expect(again.body).toMatchObject({ outcome: "duplicate", signal_id: first.body!.signal_id, reply: { first: true }, reply_pending: false });
  });

  it("rejections answer at once, as without wait_s", async () => {
    const started = performance.now();
    const res = await send(`reply-none-${++runs}`, "?wait_s=30");
    expect(performance.now() - started).toBeLessThan(2000);
    const problem = await expectProblemText(res, 409);
    expect(problem.outcome).toBe("rejected_not_waiting");
    expect(problem).not.toHaveProperty("reply_pending");
  });

  it("a bad wait_s is 400 problem+json and changes nothing", async () => {
    const { run, waitId } = await waitingRun();
    for (const bad of ["0", "-1", "60.5", "61", "abc", "", "1e9", "NaN", "Infinity", "1,5", "5s"]) {
      const res = await fetch(`${app.baseUrl}/signals/${run}/approval?wait_s=${encodeURIComponent(bad)}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      const problem = await expectProblem(res, 400);
      expect(problem.validation_errors?.[0]?.path, bad).toBe("/wait_s");
    }
    expect((await getJson(`/waits/${waitId}`)).status).toBe("waiting");
    expect((await getJson(`/runs/${run}/signals`)).items).toEqual([]);
  });

  it("a held sender that goes away frees its place at once", async () => {
    const run = `reply-${++runs}`;
    await openWait(app, run, { signal: "approval" }, 201);
    // Held while the signal is buffered: no callback is owed to anyone meanwhile.
    const ac = new AbortController();
    const sent = fetch(`${app.baseUrl}/signals/${run}-buffered/later?wait_s=30`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}", signal: ac.signal }).catch(() => "aborted");
    const heldBefore = await waitFor("the request held", () => app.changes.held, { until: (n) => n >= 1 });
    ac.abort();
    expect(await sent).toBe("aborted");
    await waitFor("the held place freed", () => app.changes.held, { until: (n) => n < heldBefore, timeoutMs: 3000 });
  });
});

describe("what is stored as the reply", () => {
  it("a body over 64 KiB, invalid JSON or an unstorable string is not stored: delivered all the same, the attempt says why", async () => {
    const cases: Array<[CallbackAnswer, RegExp]> = [
      [{ status: 200, headers: { "content-type": "application/json" }, body: JSON.stringify({ big: "x".repeat(70_000) }) }, /larger than 65536 bytes/],
      [{ status: 200, headers: { "content-type": "application/json", "transfer-encoding": "chunked" }, body: JSON.stringify({ big: "y".repeat(70_000) }) }, /larger than 65536 bytes/],
      [{ status: 200, headers: { "content-type": "application/json" }, body: "{not json" }, /not JSON/],
      // The parser's message quotes the body, NUL and all: the attempt's error must still be storable.
      [{ status: 200, headers: { "content-type": "application/json" }, body: "\u0000" }, /not JSON/],
      [{ status: 200, headers: { "content-type": "application/json" }, body: '{"a":"\\u0000"}' }, /\\u0000 or an unpaired surrogate/],
      [{ status: 200, headers: { "content-type": "application/json" }, body: "[".repeat(100) + "]".repeat(100) }, /deeper than 64/],
    ];
    for (const [answer, why] of cases) {
      const { run, waitId } = await waitingRun(() => answer);
      const res = await send(run, "?wait_s=10");
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ reply: null, reply_pending: false, delivery_status: "delivered" });
      const attempts = await getJson(`/waits/${waitId}/deliveries`);
      expect(attempts.items).toHaveLength(1);
      expect(attempts.items[0].outcome).toBe("delivered");
      expect(attempts.items[0].error).toMatch(why);
    }
  });

  it("a body of exactly 64 KiB is stored", async () => {
    const text = JSON.stringify({ fill: "" });
    const value = { fill: "z".repeat(64 * 1024 - text.length) };
    expect(JSON.stringify(value).length).toBe(64 * 1024);
    const { run } = await waitingRun(() => jsonAnswer(value));
    const res = await send(run, "?wait_s=10");
    expect(res.body!.reply).toEqual(value);
  });

  it("only the first delivered answer counts: a redelivery's answer does not replace it", async () => {
    const { run, waitId } = await waitingRun(() => jsonAnswer({ answer: "first" }));
    const res = await send(run, "?wait_s=10");
    expect(res.body!.reply).toEqual({ answer: "first" });
    const firstAt = (await getJson(`/waits/${waitId}`)).replied_at;
    answers.set(waitId, () => jsonAnswer({ answer: "second" }));
    expect((await app.api(`/waits/${waitId}/redeliver`, { method: "POST" })).status).toBe(202);
    await drainJobs(app, { tasks: ["deliver_callback"] });
    const wait = await getJson(`/waits/${waitId}`);
    expect(wait.delivery).toMatchObject({ status: "delivered", attempts: 2 });
    expect(wait).toMatchObject({ reply: { answer: "first" }, replied_at: firstAt });
    expect((await getJson(`/signals/${res.body!.signal_id}`)).reply).toEqual({ answer: "first" });
  });

  it("a timeout callback's reply is stored on the wait (there is no signal)", async () => {
    const { waitId } = await waitingRun(() => jsonAnswer({ on: "timeout" }), { timeout_s: 60 });
    await advanceClock(app, 61);
    const wait = await waitFor("the timeout's reply", () => getJson(`/waits/${waitId}`), { until: (w) => w.replied_at !== null });
    expect(wait).toMatchObject({ status: "timed_out", reply: { on: "timeout" }, result: null });
  });

  it("a batch of callbacks delivered together stores each its own reply (record_delivery_attempts, set-based)", async () => {
    const waits = await Promise.all(Array.from({ length: 30 }, () => waitingRun()));
    for (const w of waits) answers.set(w.waitId, () => jsonAnswer({ for: w.waitId }));
    const sent = await Promise.all(waits.map((w) => send(w.run, "?wait_s=20")));
    sent.forEach((res, i) => {
      expect(res.status, res.text).toBe(200);
      expect(res.body!.reply).toEqual({ for: waits[i]!.waitId });
    });
    const [row] = await app.database.sql<{ n: number }[]>`
      select count(*)::int as n from signalbox.signals s join signalbox.waits w on w.id = s.wait_id
      where w.id = any(${waits.map((w) => w.waitId)}) and s.reply = w.reply and w.reply = jsonb_build_object('for', w.id)`;
    expect(row!.n).toBe(30);
  });

  it("an answer that trickles its body holds the delivery no longer than the attempt's time limit", { timeout: 30_000 }, async () => {
    const trickler: Server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      res.write("[");
      const tick = setInterval(() => res.write("1,"), 200);
      res.on("close", () => clearInterval(tick));
    });
    await new Promise<void>((r) => trickler.listen(0, "127.0.0.1", r));
    try {
      const run = `reply-${++runs}`;
      const { body: wait } = await openWait(app, run, { signal: "approval", callback_url: `http://127.0.0.1:${(trickler.address() as AddressInfo).port}/resume` }, 201);
      // Another engine's callback is not held up meanwhile.
      const other = await waitingRun(() => jsonAnswer({ other: true }));
      const started = performance.now();
      const slow = send(run, "?wait_s=30");
      const quick = await send(other.run, "?wait_s=10");
      expect(quick.body!.reply).toEqual({ other: true });
      const res = await slow;
      expect(performance.now() - started).toBeLessThan(16_000);
      expect(res.body).toMatchObject({ reply: null, reply_pending: false, delivery_status: "delivered" });
      const attempts = await getJson(`/waits/${wait.id}/deliveries`);
      expect(attempts.items.map((a: any) => a.outcome)).toEqual(["delivered"]);
      expect(attempts.items[0].error).toMatch(/cut short/);
    } finally {
      trickler.closeAllConnections();
      await new Promise<void>((r) => trickler.close(() => r()));
    }
  });
});

describe("GET /signals/{id}", () => {
  it("reads a rejected signal (no reply will come), 404 for an unknown id, 401 without a token", async () => {
    const rejected = await send(`reply-none-${++runs}`, "");
    const id = rejected.body!.signal_id as string;
    const started = performance.now();
    const signal = await getJson(`/signals/${id}?wait_s=30`);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(signal).toMatchObject({ id, outcome: "rejected_not_waiting", reply: null, reply_pending: false, delivery_status: null });
    await expectProblem(await app.api("/signals/sg_nope"), 404);
    await expectProblem(await fetch(`${app.baseUrl}/signals/${id}`), 401);
    await expectProblem(await app.api(`/signals/${id}?wait_s=61`), 400);
  });

  it("a vote short of a quorum wait's count: its reply is owed, and is the callback's once another vote decides", async () => {
    const { run } = await waitingRun(() => jsonAnswer({ order_status: "approved" }), { quorum: { count: 2 } });
    const first = await send(run, "", { response: "approve", responder: "kim" });
    expect(first.body).toMatchObject({ outcome: "received" });
    const id = first.body!.signal_id as string;
    expect(await getJson(`/signals/${id}`)).toMatchObject({ reply: null, reply_pending: true, delivery_status: null });
    const held = getJson(`/signals/${id}?wait_s=30`);
    const second = await send(run, "?wait_s=30", { response: "approve", responder: "lee" });
    expect(second.body).toMatchObject({ outcome: "received", reply: { order_status: "approved" }, reply_pending: false });
    expect(await held).toMatchObject({ reply: { order_status: "approved" }, reply_pending: false, delivery_status: "delivered" });
  });

  it("a buffered signal of a cancelled run: no wait will take it, so no reply will come", async () => {
    const run = `reply-cancelled-${++runs}`;
    const buffered = await send(run, "", { n: 1 }, {}, "later");
    expect(buffered.body).toMatchObject({ outcome: "buffered" });
    expect(await getJson(`/signals/${buffered.body!.signal_id}`)).toMatchObject({ reply_pending: true });
    expect((await app.api(`/runs/${run}/cancel`, { method: "POST", json: {} })).status).toBe(200);
    const started = performance.now();
    expect(await getJson(`/signals/${buffered.body!.signal_id}?wait_s=30`)).toMatchObject({ outcome: "buffered", reply_pending: false, delivery_status: null });
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it("GET on the POST-only paths under /signals is 405 with Allow: POST, not a signal lookup", async () => {
    for (const path of ["/signals/redrive", "/signals/batch"]) {
      const res = await app.api(path);
      await expectProblem(res, 405);
      expect(res.headers.get("allow")).toBe("POST");
    }
  });
});

describe("held requests are bounded", () => {
  it("past SIGNALBOX_MAX_HELD_REQUESTS an intake with wait_s answers at once (202, reply pending), never 503", async () => {
    const small = await startTestApp({ env: { SIGNALBOX_MAX_HELD_REQUESTS: "1" } });
    try {
      await declareType(small, "approval");
      const hang = await startCallbackReceiver(() => new Promise<number>(() => {}));
      try {
        for (const run of ["cap-1", "cap-2"]) await openWait(small, run, { signal: "approval", callback_url: hang.url }, 201);
        const first = intake(small, "cap-1", "approval?wait_s=20", "{}");
        await waitFor("one request held", () => small.changes.held, { until: (n) => n === 1 });
        const started = performance.now();
        const second = await intake(small, "cap-2", "approval?wait_s=20", "{}");
        expect(performance.now() - started).toBeLessThan(2000);
        expect(second.status, second.text).toBe(202);
        expect(second.body).toMatchObject({ outcome: "received", reply_pending: true });
        // Shutdown answers the held one at once.
        const closing = small.close();
        const res = await first;
        expect(res.status).toBe(202);
        expect(res.body).toMatchObject({ reply_pending: true });
        await closing;
      } finally {
        hang.close().catch(() => {});
      }
    } catch (err) {
      await small.close().catch(() => {});
      throw err;
    }
  });
});

async function expectProblemText(res: { status: number; contentType: string; body?: Record<string, any> }, status: number) {
  expect(res.status).toBe(status);
  expect(res.contentType).toMatch(/^application\/problem\+json/);
  return res.body!;
}
