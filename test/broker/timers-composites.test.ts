import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nextCronTime } from "../../src/waits/kinds/timer-spec.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { expectProblem, openWait } from "../helpers/http.ts";
import { drainJobs } from "../helpers/race-gates.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
beforeAll(async () => {
  // A hanging sensor times out within the test; long enough that a 2 MB body is still read (and
  // refused as too large) on a loaded machine: at 300 ms CI once saw it time out instead.
  app = await startTestApp({ env: { SIGNALBOX_SENSOR_TIMEOUT_MS: "1500" } });
  engine = await startCallbackReceiver();
  for (const name of ["approval", "payment", "shipment"]) {
    await app.api(`/signal-types/${name}`, { method: "PUT", json: { auth: { scheme: "none" }, buffer_ttl_s: 60 } });
  }
  await app.api("/signal-types/vote", { method: "PUT", json: { auth: { scheme: "none" }, responses: ["approve", "reject"] } });
});
afterAll(async () => {
  await app.close();
  await engine.close();
});

const open = (run: string, spec: Record<string, unknown>) => openWait(app, run, spec);
const settle = async (id: string, waitS = 10) => (await (await app.api(`/waits/${id}?wait_s=${waitS}`)).json()) as any;
const send = (run: string, signal: string, payload: unknown) =>
  fetch(`${app.baseUrl}/signals/${run}/${signal}`, { method: "POST", body: JSON.stringify(payload) }).then(async (r) => ({ status: r.status, body: (await r.json()) as any }));

describe("timer waits", () => {
  it("a delay_s timer is received with {fired_at} and shows fires_at; the callback says signal.received", async () => {
    const { status, body } = await open("timer-1", { signal: "nap", timer: { delay_s: 60 }, callback_url: engine.url });
    expect(status).toBe(201);
    expect(body).toMatchObject({ kind: "timer", status: "waiting", fires_at: expect.any(String) });
    await advanceClock(app, 59);
    expect((await settle(body.id, 0)).status).toBe("waiting"); // a second early: not yet
    await advanceClock(app, 1);
    const done = await settle(body.id);
    expect(done.status).toBe("received");
    expect(Date.parse(done.result.payload.fired_at)).toBeGreaterThanOrEqual(Date.parse(done.fires_at));
    expect(done.result.sequence).toBe(1);
    const cbs = await engine.waitFor(1);
    expect(cbs.find((c) => c.json.wait.id === body.id)?.json.type).toBe("signal.received");
  });

  it("an `at` timer in the past fires at once; a timer wait can be cancelled", async () => {
    const past = await open("timer-2", { signal: "past", timer: { at: "2020-01-01T00:00:00Z" } });
    expect((await settle(past.body.id)).status).toBe("received");
    const later = await open("timer-2", { signal: "later", timer: { at: "2099-01-01T00:00:00Z" } });
    expect((await app.api(`/waits/${later.body.id}/cancel`, { method: "POST" })).status).toBe(200);
  });

  it("computes cron times in the time zone, across a DST change", () => {
    // 02:30 every day in New York: on 2026-03-08 clocks jump 02:00 → 03:00 (EDT begins).
    const before = nextCronTime("30 2 * * *", "America/New_York", new Date("2026-03-07T12:00:00Z"));
    expect(before.toISOString()).toBe("2026-03-08T07:30:00.000Z"); // the skipped 02:30 fires at 03:30 EDT
    const after = nextCronTime("30 2 * * *", "America/New_York", new Date("2026-03-08T12:00:00Z"));
    expect(after.toISOString()).toBe("2026-03-09T06:30:00.000Z"); // 02:30 EDT = 06:30 UTC
    // Autumn: 2026-11-01 01:30 happens twice; it fires once.
    const fall = nextCronTime("30 1 * * *", "America/New_York", new Date("2026-11-01T04:00:00Z"));
    expect(fall.toISOString()).toBe("2026-11-01T05:30:00.000Z");
    expect(nextCronTime("30 1 * * *", "America/New_York", fall).toISOString()).toBe("2026-11-02T06:30:00.000Z");
  });

  it("a cron wait shows the next fire time; a bad cron or time zone is 400", async () => {
    const { body } = await open("timer-3", { signal: "daily", timer: { cron: "0 9 * * 1-5", timezone: "America/New_York" } });
    expect(new Date(body.fires_at).getUTCHours() % 24).toBeGreaterThanOrEqual(13); // 09:00 New York is 13:00 or 14:00 UTC
    await expectProblem(await app.api("/runs/timer-3/waits", { method: "POST", json: { signal: "x", timer: { cron: "not cron" } } }), 400);
    await expectProblem(await app.api("/runs/timer-3/waits", { method: "POST", json: { signal: "y", timer: { cron: "0 9 * * *", timezone: "Mars/Olympus" } } }), 400);
  });
});

describe("composite waits", () => {
  it("`all` is received when every member is, with {members}; members show with their parent", async () => {
    const { body } = await open("comp-1", { signal: "ready-to-ship", all: [{ signal: "approval" }, { signal: "payment" }], callback_url: engine.url });
    expect(body.kind).toBe("all");
    const listed = ((await (await app.api("/runs/comp-1/waits?status=waiting")).json()) as any).items;
    expect(listed.filter((w: any) => w.parent_wait_id === body.id).map((w: any) => w.signal).sort()).toEqual(["approval", "payment"]);
    await send("comp-1", "approval", { ok: true });
    expect((await settle(body.id, 0)).status).toBe("waiting");
    await send("comp-1", "payment", { amount: 5 });
    const done = await settle(body.id);
    expect(done.status).toBe("received");
    expect(done.result.payload.members.approval.payload).toEqual({ ok: true });
    expect(done.result.payload.members.payment.payload).toEqual({ amount: 5 });
  });

  it("`any` is received with the first member and cancels the rest", async () => {
    const { body } = await open("comp-2", { signal: "first", any: [{ signal: "approval" }, { signal: "nap", timer: { delay_s: 3600 } }] });
    await send("comp-2", "approval", { ok: 1 });
    const done = await settle(body.id);
    expect(done.status).toBe("received");
    expect(Object.keys(done.result.payload.members)).toEqual(["approval"]);
    const members = ((await (await app.api("/runs/comp-2/waits")).json()) as any).items.filter((w: any) => w.parent_wait_id === body.id);
    expect(members.find((m: any) => m.signal === "nap").status).toBe("cancelled");
  });

  it("a member timing out times out an `all`; a buffered signal settles a member at once", async () => {
    await send("comp-3", "approval", { early: true }); // buffered before the wait exists
    const { body } = await open("comp-3", { signal: "both", all: [{ signal: "approval" }, { signal: "payment", timeout_s: 60 }] });
    await advanceClock(app, 60);
    const done = await settle(body.id);
    expect(done.status).toBe("timed_out");
  });

  it("two members resolving at once resolve the parent once", async () => {
    for (let i = 0; i < 10; i++) {
      const { body } = await open(`comp-race-${i}`, { signal: "either", any: [{ signal: "approval" }, { signal: "payment" }], callback_url: engine.url });
      const answers = await Promise.all([send(`comp-race-${i}`, "approval", {}), send(`comp-race-${i}`, "payment", {})]);
      expect(answers.every((a) => a.status === 202 || a.status === 409)).toBe(true);
      const done = await settle(body.id);
      expect(done.status).toBe("received");
      const events = ((await (await app.api(`/runs/comp-race-${i}/events?limit=500`)).json()) as any).items;
      expect(events.filter((e: any) => e.wait_id === body.id && e.type === "signal.received")).toHaveLength(1);
    }
    await engine.waitFor(10);
    // No delivery left pending or running: no further callback can come (the cancelled `nap`
    // member of comp-2 leaves a timer job an hour off, which calls nobody).
    await drainJobs(app, { tasks: ["deliver_callback"] });
    const parents = engine.received.filter((c) => String(c.json.wait.run_id).startsWith("comp-race-"));
    expect(parents).toHaveLength(10);
  });

  it("refuses a composite with repeated names or two sources", async () => {
    await expectProblem(await app.api("/runs/comp-4/waits", { method: "POST", json: { signal: "x", all: [{ signal: "approval" }, { signal: "approval" }] } }), 400);
    await expectProblem(await app.api("/runs/comp-4/waits", { method: "POST", json: { signal: "x", timer: { delay_s: 1 }, all: [{ signal: "approval" }] } }), 400);
  });
});

describe("quorum", () => {
  it("counts distinct responders; received at count; partial votes show on the wait and in history", async () => {
    const { body } = await open("q-1", { signal: "vote", quorum: { count: 2, veto: ["reject"] } });
    expect((await send("q-1", "vote", { response: "approve", responder: "kim" })).status).toBe(202);
    await send("q-1", "vote", { response: "approve", responder: "kim" }); // same responder: one vote
    let wait = await settle(body.id, 0);
    expect(wait).toMatchObject({ status: "waiting", votes: { approve: ["kim"] }, quorum: { count: 2, veto: ["reject"] } });
    await send("q-1", "vote", { response: "approve", responder: "lee" });
    wait = await settle(body.id);
    expect(wait.status).toBe("received");
    expect(wait.votes).toEqual({ approve: ["kim", "lee"] });
    const events = ((await (await app.api("/runs/q-1/events")).json()) as any).items.map((e: any) => e.type);
    expect(events.filter((t: string) => t === "signal.vote")).toHaveLength(2);
  });

  it("a veto resolves at once", async () => {
    const { body } = await open("q-2", { signal: "vote", quorum: { count: 3, veto: ["reject"] } });
    await send("q-2", "vote", { response: "approve", responder: "kim" });
    await send("q-2", "vote", { response: "reject", responder: "lee" });
    const wait = await settle(body.id);
    expect(wait.status).toBe("received");
    expect(wait.result.payload).toEqual({ response: "reject", responder: "lee" });
  });
});

describe("quorum votes sent before the wait opened (buffered)", () => {
  it("count as votes when it opens, in the order they came; the wait is received only when they decide it", async () => {
    await app.api("/signal-types/ballot", { method: "PUT", json: { auth: { scheme: "none" }, buffer_ttl_s: 60 } });
    for (const responder of ["kim", "kim", "lee"]) expect((await send("q-buffered", "ballot", { response: "approve", responder })).status).toBe(202);
    const { body } = await open("q-buffered", { signal: "ballot", quorum: { count: 3, veto: ["reject"] } });
    expect(body).toMatchObject({ status: "waiting", votes: { approve: ["kim", "lee"] } });
    await send("q-buffered", "ballot", { response: "approve", responder: "max" });
    const wait = await settle(body.id);
    expect(wait).toMatchObject({ status: "received", votes: { approve: ["kim", "lee", "max"] } });
    expect(wait.result.payload).toEqual({ response: "approve", responder: "max" });
  });

  it("a buffered veto receives the wait as it opens", async () => {
    for (const [response, responder] of [["approve", "kim"], ["reject", "lee"]]) await send("q-buffered-veto", "ballot", { response, responder });
    const { body } = await open("q-buffered-veto", { signal: "ballot", quorum: { count: 3, veto: ["reject"] } });
    expect(body).toMatchObject({ status: "received", votes: { approve: ["kim"], reject: ["lee"] } });
    expect(body.result.payload).toEqual({ response: "reject", responder: "lee" });
  });
});

describe("quorum votes no 5xx can come from", () => {
  it("a number Postgres's jsonb cannot hold, and a responder too long to index: each a vote, answered 202", async () => {
    const { body } = await open("q-odd", { signal: "vote", quorum: { count: 3 } });
    const raw = (text: string) => fetch(`${app.baseUrl}/signals/q-odd/vote`, { method: "POST", body: text }).then((r) => r.status);
    expect(await raw('{"response": "approve", "responder": "kim", "weight": 1e200000}')).toBe(202);
    const long = "r".repeat(3000);
    expect((await send("q-odd", "vote", { response: "approve", responder: long })).status).toBe(202);
    expect((await send("q-odd", "vote", { response: "approve", responder: long })).status).toBe(202); // the same responder: one vote
    expect((await send("q-odd", "vote", { response: "approve", responder: `${long}x` })).status).toBe(202); // another one
    const wait = await settle(body.id);
    expect(wait.status).toBe("received");
    expect(wait.votes.approve).toHaveLength(3);
    expect(wait.votes.approve[0]).toBe("kim");
    expect(wait.votes.approve[1]).toMatch(/^r{160}…[0-9a-f]{32}$/);
  });
});

describe("sensor waits", () => {
  let target: ReturnType<typeof createServer>;
  let base = "";
  let hits = 0;
  beforeAll(async () => {
    target = createServer((req, res) => {
      hits++;
      if (req.url === "/ready-after-2") {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ ready: hits % 100 >= 3, n: hits }));
      } else if (req.url === "/error") {
        res.statusCode = 500;
        res.end("boom");
      } else if (req.url === "/huge") {
        res.end("x".repeat(2 * 1024 * 1024));
      } else if (req.url === "/slow") {
        setTimeout(() => res.end("{}"), 60_000).unref();
      } else res.end("{}");
    });
    await new Promise<void>((r) => target.listen(0, "127.0.0.1", r));
    base = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    target.closeAllConnections();
    target.close();
  });

  it("polls until the pointer equals the value; that response is the payload", async () => {
    hits = 0;
    const { body } = await open("s-1", { signal: "fresh", sensor: { url: `${base}/ready-after-2`, pointer: "/ready", equals: true, interval_s: 1, max_polls: 10 } });
    // Each poll sets the next one interval_s later: moving the clock on brings it due at once.
    const done = await waitFor("the sensor's third poll to receive the wait", async () => {
      await advanceClock(app, 1);
      return settle(body.id, 0);
    }, { until: (w) => w.status !== "waiting" });
    expect(done.status).toBe("received");
    expect(done.result.payload.ready).toBe(true);
    expect(hits).toBe(3);
  });

  it("an erroring, hanging or huge-bodied sensor is a miss, never a crash; max_polls misses time the wait out", async () => {
    const err = await open("s-2", { signal: "err", sensor: { url: `${base}/error`, interval_s: 1, max_polls: 2 } });
    const huge = await open("s-2", { signal: "huge", sensor: { url: `${base}/huge`, interval_s: 1, max_polls: 1 } });
    const slow = await open("s-2", { signal: "slow", sensor: { url: `${base}/slow`, interval_s: 1, max_polls: 1 } });
    const down = await open("s-2", { signal: "down", sensor: { url: "http://127.0.0.1:9/", interval_s: 1, max_polls: 1 } });
    const settled = await waitFor("every sensor to run out of polls", async () => {
      await advanceClock(app, 1);
      return Promise.all([err, huge, slow, down].map((w) => settle(w.body.id, 0)));
    }, { until: (ws) => ws.every((w) => w.status !== "waiting"), timeoutMs: 15_000 });
    for (const w of settled) expect(w.status).toBe("timed_out");
    const events = ((await (await app.api("/runs/s-2/events?limit=500")).json()) as any).items.filter((e: any) => e.type === "signal.timeout");
    expect(events.map((e: any) => e.data.last).sort()).toEqual(["HTTP 500", "response larger than 262144 bytes", "timed out", expect.stringMatching(/^request failed/)].sort());
  });

  it("refuses link-local (metadata) targets", async () => {
    await expectProblem(await app.api("/runs/s-3/waits", { method: "POST", json: { signal: "meta", sensor: { url: "http://169.254.169.254/latest/meta-data" } } }), 400);
    await expectProblem(await app.api("/runs/s-3/waits", { method: "POST", json: { signal: "meta6", sensor: { url: "http://[fe80::1]/" } } }), 400);
    await expectProblem(await app.api("/runs/s-3/waits", { method: "POST", json: { signal: "ftp", sensor: { url: "ftp://example.com/" } } }), 400);
  });
});
