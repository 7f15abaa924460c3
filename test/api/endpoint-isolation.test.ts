import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { body, declareType, openWait, intake, readAll } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// Delivery isolation (issue 13, item 1): a callback endpoint that hangs, or keeps failing, costs
// the others nothing. Caused for real: an HTTP endpoint that never answers with hundreds of
// callbacks owed to it, while a healthy endpoint gets its callbacks and timeouts fire. Nothing
// is timed: every callback arrives, every timeout fires, nothing is lost.

const PER_ENDPOINT = 16;
const HUNG_WAITS = 300;

let app: TestApp;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  // As few job slots as the shipped default for timeouts, fewer for deliveries: with one
  // runner for both, 300 hung attempts of 10 s each would hold them all for minutes.
  app = await startTestApp({
    env: { SIGNALBOX_WORKER_CONCURRENCY: "4", SIGNALBOX_DELIVERY_CONCURRENCY: "8", SIGNALBOX_DELIVERY_ENDPOINT_CONCURRENCY: String(PER_ENDPOINT) },
  });
  await declareType(app, "approval");
});
afterAll(async () => {
  await app?.close(); // first: it aborts its requests in flight to the hung endpoint
  await Promise.all(closers.map((c) => c()));
});

/** An endpoint that takes every request and never answers. */
async function hungEndpoint() {
  let inFlight = 0;
  let maxInFlight = 0;
  let requests = 0;
  const held = new Set<ServerResponse>();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    requests++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    held.add(res);
    req.resume();
    res.on("close", () => (inFlight--, held.delete(res)));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/resume`;
  return { url, host: new URL(url).host, stats: () => ({ requests, inFlight, maxInFlight }) };
}

async function receiver(respond: () => number) {
  const r = await startCallbackReceiver(respond);
  closers.push(r.close);
  return { ...r, host: new URL(r.url).host };
}

const metric = async (name: string) => {
  const text = await (await fetch(`${app.baseUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
  return line ? Number(line.split(" ").at(-1)) : undefined;
};

describe("a hung callback endpoint", () => {
  it("with hundreds of callbacks owed: a healthy endpoint gets every callback and every timeout fires", async () => {
    const hung = await hungEndpoint();
    const healthy = await receiver(() => 204);

    // 300 waits call back to the hung endpoint; their deadline passes together.
    for (let i = 0; i < HUNG_WAITS; i++) await openWait(app, `hung-${i}`, { signal: "approval", timeout_s: 3600, callback_url: hung.url }, 201);
    await advanceClock(app, 3600);
    await waitFor("the hung endpoint's slots all taken", () => hung.stats().inFlight, { until: (n) => n >= PER_ENDPOINT });

    // Meanwhile: 50 signals and 50 timeouts whose callbacks go to the healthy endpoint.
    const signalled: string[] = [];
    const timed: string[] = [];
    for (let i = 0; i < 50; i++) {
      signalled.push((await openWait(app, `ok-signal-${i}`, { signal: "approval", callback_url: healthy.url }, 201)).body.id);
      timed.push((await openWait(app, `ok-timeout-${i}`, { signal: "approval", timeout_s: 60, callback_url: healthy.url }, 201)).body.id);
    }
    for (let i = 0; i < 50; i++) expect((await intake(app, `ok-signal-${i}`, "approval", "{}")).status).toBe(202);
    await advanceClock(app, 60);

    const received = await healthy.waitFor(100, 20_000);
    const byWait = new Map(received.map((cb) => [cb.json.wait.id, cb.json.type]));
    for (const id of signalled) expect(byWait.get(id)).toBe("signal.received");
    for (const id of timed) expect(byWait.get(id)).toBe("signal.timeout");
    // Recorded once each batch's sends have answered (just after the callbacks arrived).
    for (const id of timed) await waitFor(`wait ${id} delivered`, async () => (await body(app.api(`/waits/${id}`))).delivery.status, { until: (s) => s === "delivered" });

    // The hung endpoint never had more than its cap in flight, and nothing owed to it was lost:
    // every one of its callbacks is still pending (its requests time out, retries follow).
    expect(hung.stats().maxInFlight).toBeLessThanOrEqual(PER_ENDPOINT);
    const owed = await readAll<{ id: string; delivery: { status: string } }>(app, `/waits?signal=approval&status=timed_out&delivery=pending`, 500);
    const hungOwed = owed.items.filter((w) => !timed.includes(w.id));
    expect(hungOwed).toHaveLength(HUNG_WAITS);
    // What the job let go of (requests still hanging) or turned away (the endpoint stuck) is counted.
    await waitFor("deferred callbacks counted", () => metric("signalbox_deliveries_deferred_total"), { until: (n) => (n ?? 0) > 0 });
  });
});

describe("an endpoint that keeps failing", () => {
  it("is backed off as a whole: the metrics and the wait's deliveries show it; other endpoints go on", async () => {
    const failing = await receiver(() => 503);
    const healthy = await receiver(() => 204);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) {
      ids.push((await openWait(app, `failing-${i}`, { signal: "approval", callback_url: failing.url }, 201)).body.id);
      expect((await intake(app, `failing-${i}`, "approval", "{}")).status).toBe(202);
    }
    await waitFor("the endpoint backed off", () => metric("signalbox_delivery_endpoint_backoffs_total"), { until: (n) => (n ?? 0) >= 1 });

    // The wait's deliveries say why an attempt was not sent.
    const notSent = await waitFor(
      "an attempt not sent for the backoff",
      async () => {
        for (const id of ids) {
          const attempts = (await readAll<{ error: string | null; status_code: number | null; outcome: string }>(app, `/waits/${id}/deliveries`, 100)).items;
          const refused = attempts.find((a) => a.error?.startsWith("not sent: endpoint backed off"));
          if (refused) return refused;
        }
        return undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(notSent).toMatchObject({ status_code: null, outcome: expect.stringMatching(/^(retry|failed)$/) });
    // Far fewer requests reached it than attempts were recorded.
    const recorded = (await Promise.all(ids.map(async (id) => (await body(app.api(`/waits/${id}`))).delivery.attempts as number))).reduce((a, b) => a + b, 0);
    expect(failing.received.length).toBeLessThan(recorded);

    // Another endpoint is not held back.
    await openWait(app, "beside-failing", { signal: "approval", callback_url: healthy.url }, 201);
    await intake(app, "beside-failing", "approval", "{}");
    await healthy.waitFor(1);
  });
});

describe("a hung notify_url or sensor", () => {
  it("holds no delivery slot for its time limit: with one slot, both hang at once and a callback still goes", async () => {
    // One delivery slot, and a sensor's time limit of a minute: a job that waited on its
    // request would hold the slot for 10 s (the notification) or 60 s (the sensor poll).
    const one = await startTestApp({ env: { SIGNALBOX_DELIVERY_CONCURRENCY: "1", SIGNALBOX_SENSOR_TIMEOUT_MS: "60000" } });
    closers.unshift(() => one.close()); // closed first: it aborts its requests in flight to the hung endpoint
    const hung = await hungEndpoint();
    const healthy = await receiver(() => 204);
    await declareType(one, "hung-notify", { auth: { scheme: "none" }, notify_url: hung.url });
    await declareType(one, "approval");

    await openWait(one, "notified", { signal: "hung-notify" }, 201);
    await openWait(one, "sensed", { signal: "ready", sensor: { url: hung.url, interval_s: 60, max_polls: 3 } }, 201);
    // Both requests in flight together: each job let go of its own.
    await waitFor("the notification and the sensor poll in flight at once", () => hung.stats().inFlight, { until: (n) => n >= 2, timeoutMs: 20_000 });

    // Cancelled, not signalled: intake hands its callbacks to the process's delivery engine
    // without a job slot; a cancel's callback job needs the one slot.
    const { body: wait } = await openWait(one, "called-back", { signal: "approval", callback_url: healthy.url }, 201);
    expect((await one.api(`/waits/${wait.id}/cancel`, { method: "POST" })).status).toBe(200);
    const [cb] = await healthy.waitFor(1, 20_000);
    expect(cb!.json.wait.id).toBe(wait.id);
    const text = await (await fetch(`${one.baseUrl}/metrics`)).text();
    expect(text).toMatch(/signalbox_deliveries_deferred_total\{reason="slow_endpoint"\} [2-9]/);
    // Neither is lost: each is still owed (a job due after its limit).
    const [notification] = await one.database.sql`select status from signalbox.notifications where wait_id in (select id from signalbox.waits where run_id = 'notified')`;
    expect(notification?.status).toBe("pending");
    const jobs = await one.database.sql`select key from graphile_worker.jobs where key like 'notify:%' or key like 'sensor:%'`;
    expect(jobs.map((j) => String(j.key).split(":")[0]).sort()).toEqual(["notify", "sensor"]);
  });
});
