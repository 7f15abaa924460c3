import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { heldOpen } from "../../../test/helpers/race-gates.ts";
import { API_KEY, CALLBACK_SECRET, startTestApp, type TestApp } from "../../../test/helpers/test-app.ts";
import { waitFor } from "../../../test/helpers/wait-for.ts";
import {
  createClient,
  nodeCallbackHandler,
  paginate,
  SignalboxProblem,
  WaitTimeoutError,
  type RunEvent,
  type SignalboxClient,
  type SignalboxEvent,
} from "../src/index.ts";

/** An engine: a node:http server whose only route is the SDK's callback handler. */
async function startEngine(answer: () => "ok" | "fail" = () => "ok") {
  const events: SignalboxEvent[] = [];
  const server: Server = createServer(
    nodeCallbackHandler({
      secret: CALLBACK_SECRET,
      onEvent: (event) => {
        events.push(event);
        if (answer() === "fail") throw new Error("engine not ready");
      },
      onError: () => {},
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/resume`,
    events,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

async function problemOf(promise: Promise<unknown>): Promise<SignalboxProblem> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SignalboxProblem);
  return err as SignalboxProblem;
}

let app: TestApp;
let client: SignalboxClient;
let engine: Awaited<ReturnType<typeof startEngine>>;

beforeAll(async () => {
  app = await startTestApp();
  client = createClient({ baseUrl: app.baseUrl, token: API_KEY });
  engine = await startEngine();
  await client.signalTypes.put("manager-approval", {
    schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" } } },
    auth: { scheme: "none" },
  });
});

afterAll(async () => {
  await engine?.close();
  await app?.close();
});

describe("createClient against a live signalbox", () => {
  it("opens a wait, long-polls it while a signal arrives, and the engine gets the verified callback", async () => {
    const wait = await client.waits.open("order-1", { signal: "manager-approval", key: "approval", callback_url: engine.url, metadata: { order_id: "o-1" } });
    expect(wait).toMatchObject({ run_id: "order-1", status: "waiting", metadata: { order_id: "o-1" } });

    const resolved = client.waits.waitFor(wait.id, { timeoutMs: 20_000 });
    await heldOpen(app); // the long-poll is parked on the server before the signal is sent
    const sent = await client.signals.send("order-1", "manager-approval", { approved: true });
    expect(sent).toMatchObject({ outcome: "received", sequence: 1, wait_id: wait.id });
    expect(sent.idempotency_key).toMatch(/^[0-9a-f-]{36}$/);

    expect(await resolved).toMatchObject({ id: wait.id, status: "received", result: { sequence: 1, payload: { approved: true } } });
    const [event] = await waitFor("the callback", () => engine.events.filter((e) => "wait" in e && e.wait.id === wait.id), { until: (e) => e.length === 1 });
    expect(event).toMatchObject({ type: "signal.received", wait: { id: wait.id, status: "received" } });
    expect(event!.id).toMatch(/^ev_/);
  });

  it("returns the same wait for the same key, and the same signal for the same idempotency key", async () => {
    const first = await client.waits.open("order-2", { signal: "manager-approval", key: "approval" });
    const again = await client.waits.open("order-2", { signal: "manager-approval", key: "approval" });
    expect(again.id).toBe(first.id);
    const sent = await client.signals.send("order-2", "manager-approval", { approved: false }, { idempotencyKey: "order-2-approval" });
    const repeated = await client.signals.send("order-2", "manager-approval", { approved: false }, { idempotencyKey: "order-2-approval" });
    expect(repeated).toMatchObject({ outcome: "duplicate", signal_id: sent.signal_id, idempotency_key: "order-2-approval" });
    expect((await client.signals.ofRun("order-2")).items).toHaveLength(1);
  });

  it("throws the server's problem, typed: outcome, status, detail and validation_errors", async () => {
    await client.waits.open("order-3", { signal: "manager-approval" });
    const invalid = await problemOf(client.signals.send("order-3", "manager-approval", { approved: "yes" }));
    expect(invalid).toMatchObject({ status: 422, outcome: "rejected_invalid_payload" });
    expect(invalid.validation_errors.map((e) => e.path)).toEqual(["/approved"]);

    const conflict = await problemOf(client.waits.open("order-3", { signal: "manager-approval" }));
    expect(conflict.status).toBe(409);
    expect(conflict.detail).not.toBe("");

    expect((await problemOf(client.waits.get("wt_unknown"))).status).toBe(404);
    expect((await problemOf(client.signals.send("order-3", "no-such-signal", {}))).outcome).toBe("rejected_unknown_signal");
    const stranger = createClient({ baseUrl: app.baseUrl, token: "wrong-token" });
    expect((await problemOf(stranger.waits.find())).status).toBe(401);
  });

  it("runs.continue hands a run's work to a new run; intake answers name the run they were applied to", async () => {
    const old = await client.waits.open("order-c1", { signal: "manager-approval" });
    const run = await client.runs.continue("order-c1", "order-c2", { by: "engine", reason: "history too long" });
    expect(run).toMatchObject({ run_id: "order-c1", status: "continued", continued_as: "order-c2", newest_run_id: "order-c2" });
    expect((await client.waits.get(old.id)).status).toBe("cancelled");
    expect((await client.runs.continue("order-c1", "order-c2")).continued_as).toBe("order-c2"); // again: the same

    const wait = await client.waits.open("order-c1", { signal: "manager-approval" });
    expect(wait.run_id).toBe("order-c2");
    const sent = await client.signals.send("order-c1", "manager-approval", { approved: true });
    expect(sent).toMatchObject({ outcome: "received", wait_id: wait.id, run_id: "order-c2" });
    const refused = await problemOf(client.runs.continue("order-c1", "order-c3"));
    expect(refused).toMatchObject({ status: 409, title: "already_continued" });
  });

  it("waitFor gives up with WaitTimeoutError carrying the wait, still waiting", async () => {
    const wait = await client.waits.open("order-4", { signal: "manager-approval" });
    const err = await client.waits.waitFor(wait.id, { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WaitTimeoutError);
    expect((err as WaitTimeoutError).wait).toMatchObject({ id: wait.id, status: "waiting" });
  });

  it("finds waits by metadata, and paginate follows next_cursor across pages", async () => {
    await client.signalTypes.put("expense-approval", { auth: { scheme: "none" } });
    const kim1 = await client.waits.open("expense-1", { signal: "expense-approval", metadata: { assignee: "kim" } });
    await client.waits.open("expense-2", { signal: "expense-approval", metadata: { assignee: "lee" } });
    const kim3 = await client.waits.open("expense-3", { signal: "expense-approval", metadata: { assignee: "kim" } });

    const kims = await client.waits.find({ signal: "expense-approval", status: "waiting", metadata: { assignee: "kim" } });
    expect(kims.items.map((w) => w.id)).toEqual([kim1.id, kim3.id]);

    const all: string[] = [];
    for await (const w of paginate((cursor) => client.waits.find({ signal: "expense-approval", limit: 1, cursor }))) all.push(w.run_id);
    expect(all).toEqual(["expense-1", "expense-2", "expense-3"]);
  });

  it("finds waits by metadata keys that mean something in a query string (&, +, #)", async () => {
    await client.signalTypes.put("lab-approval", { auth: { scheme: "none" } });
    const rnd = await client.waits.open("lab-1", { signal: "lab-approval", metadata: { "R&D": "yes" } });
    const plus = await client.waits.open("lab-2", { signal: "lab-approval", metadata: { "a+b": "1" } });
    const blue = await client.waits.open("lab-3", { signal: "lab-approval", metadata: { "team#": "blue" } });
    await client.waits.open("lab-4", { signal: "lab-approval", metadata: { "team#": "red" } });

    const ids = async (metadata: Record<string, string>) => (await client.waits.find({ signal: "lab-approval", metadata })).items.map((w) => w.id);
    expect(await ids({ "R&D": "yes" })).toEqual([rnd.id]);
    expect(await ids({ "a+b": "1" })).toEqual([plus.id]);
    // Cut at the '#', the filter was dropped: every wait of the type matched.
    expect(await ids({ "team#": "blue" })).toEqual([blue.id]);
  });

  it("refuses '.' and '..' as a run id (or any path parameter): the URL would take them as dot segments, another route", async () => {
    const sent: string[] = [];
    const recording = createClient({ baseUrl: app.baseUrl, token: API_KEY, fetch: (req) => (sent.push(`${req.method} ${new URL(req.url).pathname}`), fetch(req)) });
    // POST /signals/./batch is POST /signals/batch: the payload would be run as a batch of signals to other runs.
    await expect(recording.signals.send(".", "batch", { signals: [] })).rejects.toThrow(TypeError);
    await expect(recording.runs.events(".")).rejects.toThrow(TypeError);
    await expect(recording.waits.get("..")).rejects.toThrow(TypeError);
    await expect(recording.signalTypes.get("..")).rejects.toThrow(TypeError);
    expect(sent).toEqual([]);
    // A dot inside an id is an id like any other.
    await expect(recording.runs.events("order.17")).resolves.toMatchObject({ items: [] });
    expect(sent).toEqual(["GET /runs/order.17/events"]);
  });

  it("runs.follow yields the run's history, then its new events as they happen", async () => {
    const wait = await client.waits.open("order-5", { signal: "manager-approval" });
    const stop = new AbortController();
    const seen: RunEvent[] = [];
    const following = (async () => {
      for await (const event of client.runs.follow("order-5", { signal: stop.signal })) {
        seen.push(event);
        if (event.type === "signal.received") stop.abort();
      }
    })();
    await waitFor("the history's first event", () => seen.length, { until: (n) => n === 1 });
    expect(seen[0]).toMatchObject({ type: "signal.waiting", wait_id: wait.id });
    await client.signals.send("order-5", "manager-approval", { approved: true });
    await following;
    expect(seen.map((e) => e.type)).toEqual(["signal.waiting", "signal.received"]);
  });

  it("lists a failed delivery and redelivers it", async () => {
    let engineUp = false;
    const flaky = await startEngine(() => (engineUp ? "ok" : "fail"));
    try {
      // The engine answers 500 until it is up; with one attempt allowed, the delivery fails at once.
      const quick = await startTestApp({ env: { SIGNALBOX_DELIVERY_MAX_ATTEMPTS: "1" } });
      try {
        const c = createClient({ baseUrl: quick.baseUrl, token: API_KEY });
        await c.signalTypes.put("approval", { auth: { scheme: "none" } });
        const wait = await c.waits.open("order-6", { signal: "approval", callback_url: flaky.url });
        await c.signals.send("order-6", "approval", { ok: true });
        const failed = await waitFor("the delivery to fail", () => c.deliveries.list({ status: "failed" }), { until: (l) => l.items.length === 1 });
        expect(failed.items[0]).toMatchObject({ wait_id: wait.id });
        engineUp = true;
        await c.waits.redeliver(wait.id);
        const delivered = await waitFor("the redelivery", () => c.waits.get(wait.id), { until: (w) => w.delivery.status === "delivered" });
        expect(delivered.delivery.attempts).toBe(2);
        expect((await c.waits.deliveries(wait.id)).items).toHaveLength(2);
        expect(new Set(flaky.events.map((e) => e.id)).size).toBe(1); // the same webhook-id both times
      } finally {
        await quick.close();
      }
    } finally {
      await flaky.close();
    }
  });

  it("send with waitS returns the reply onEvent returned; signals.get reads it again", async () => {
    const replying = createServer(nodeCallbackHandler({ secret: CALLBACK_SECRET, onEvent: (event) => ({ resumed: event.type === "run.start" ? null : event.wait.id, step: "ship" }) }));
    await new Promise<void>((resolve) => replying.listen(0, "127.0.0.1", resolve));
    try {
      const wait = await client.waits.open("order-reply", { signal: "manager-approval", callback_url: `http://127.0.0.1:${(replying.address() as AddressInfo).port}/resume` });
      const sent = await client.signals.send("order-reply", "manager-approval", { approved: true }, { waitS: 10 });
      expect(sent).toMatchObject({ outcome: "received", wait_id: wait.id, reply: { resumed: wait.id, step: "ship" }, reply_pending: false, delivery_status: "delivered" });
      const record = await client.signals.get(sent.signal_id, { waitS: 5 });
      expect(record).toMatchObject({ id: sent.signal_id, run_id: "order-reply", reply: { resumed: wait.id, step: "ship" }, reply_pending: false });
      expect((await client.waits.get(wait.id)).reply).toEqual({ resumed: wait.id, step: "ship" });
    } finally {
      await new Promise<void>((resolve) => replying.close(() => resolve()));
    }
  });

  it("exposes every operation of the document through api (openapi-fetch)", async () => {
    const { data, response } = await client.api.GET("/signal-types/{name}", { params: { path: { name: "manager-approval" } } });
    expect(response.status).toBe(200);
    expect(data?.auth.scheme).toBe("none");
  });
});
