import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WAIT_CHANGED_CHANNEL } from "../../src/events/change-feed.ts";
import { expireWait } from "../../src/timeouts/expire-wait.ts";
import { RESOLUTION_EVENTS } from "../../src/waits/resolve-waits.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { body, declareType, intake, openWait } from "../helpers/http.ts";
import { drainJobs, settledWait } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { advanceClock } from "../helpers/clock.ts";
import { waitFor } from "../helpers/wait-for.ts";

// One transition, every door: a wait leaves `waiting` through signalbox.resolve_waits whichever
// entry point moves it (batched intake, an approval link's single intake, opening a wait that
// meets a buffered signal or a past deadline on either opening path, the timeout job, cancelling
// the wait or its run, a composite settling, a quorum vote, a timer, a sensor). Each row of the
// table below drives one entry point to one outcome, and every row is held to the same account:
// the same wait state, one history event, the wake-up (NOTIFY), none of the wait's own jobs
// left, and one callback carrying that event.

type Outcome = "received" | "timed_out" | "cancelled";
interface Row {
  entry: string;
  outcome: Outcome;
  /** Drives the entry point for a fresh run; returns the wait to account for. */
  drive(run: string): Promise<string>;
}

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
let listener: postgres.Sql;
let sensorTarget: Server;
let sensorUrl = "";
const notified = new Set<string>();

beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver();
  listener = postgres(app.databaseUrl, { max: 1, onnotice: () => {} });
  await listener.listen(WAIT_CHANGED_CHANNEL, (ids) => {
    for (const id of ids.split(",")) notified.add(id);
  });
  sensorTarget = createServer((req, res) => {
    res.statusCode = req.url === "/ready" ? 200 : 500;
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ ready: req.url === "/ready" }));
  });
  await new Promise<void>((r) => sensorTarget.listen(0, "127.0.0.1", r));
  sensorUrl = `http://127.0.0.1:${(sensorTarget.address() as AddressInfo).port}`;

  await declareType(app, "approval", { auth: { scheme: "none" } });
  await declareType(app, "payment", { auth: { scheme: "none" } });
  await declareType(app, "early", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
  // A type that notifies: its waits open through the TypeScript transaction, not open_wait.
  await declareType(app, "early-notified", { auth: { scheme: "none" }, buffer_ttl_s: 600, notify_url: engine.url });
  await declareType(app, "decision", { auth: { scheme: "none" }, responses: ["approve", "reject"] });
});
afterAll(async () => {
  await listener?.end({ timeout: 5 });
  sensorTarget?.close();
  await app?.close();
  await engine?.close();
});

const open = async (run: string, spec: Record<string, unknown>, withCallback = true): Promise<{ id: string; status: string }> => {
  const { status, body: wait } = await openWait(app, run, { ...spec, ...(withCallback ? { callback_url: engine.url } : {}) });
  expect(status, JSON.stringify(wait)).toBe(201);
  return wait;
};
const send = async (run: string, signal: string, payload: unknown, status = 202) => {
  const sent = await intake(app, run, signal, JSON.stringify(payload));
  expect(sent.status, sent.text).toBe(status);
  return sent.body!;
};
const memberOf = async (run: string, parentId: string, signal: string): Promise<string> => {
  const waits = (await body(app.api(`/runs/${run}/waits`))).items as Array<{ id: string; parent_wait_id: string | null; signal: string }>;
  return waits.find((w) => w.parent_wait_id === parentId && w.signal === signal)!.id;
};
const pastDeadline = () => new Date(Date.now() - 60_000).toISOString();

const TABLE: Row[] = [
  // received
  { entry: "batched intake", outcome: "received", drive: async (run) => {
    const wait = await open(run, { signal: "approval", timeout_s: 3600 });
    await send(run, "approval", { ok: true });
    return wait.id;
  } },
  { entry: "single intake (approval link)", outcome: "received", drive: async (run) => {
    const wait = await open(run, { signal: "decision", timeout_s: 3600 });
    const { links } = await body(app.api(`/waits/${wait.id}/links`, { method: "POST", json: { responder: "kim" } }));
    const res = await fetch(links.approve, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "" });
    expect(res.status).toBe(200);
    return wait.id;
  } },
  { entry: "open_wait meeting a buffered signal", outcome: "received", drive: async (run) => {
    await send(run, "early", { early: 1 });
    const wait = await open(run, { signal: "early", timeout_s: 3600 });
    expect(wait.status).toBe("received");
    return wait.id;
  } },
  { entry: "opening transaction meeting a buffered signal", outcome: "received", drive: async (run) => {
    await send(run, "early-notified", { early: 1 });
    const wait = await open(run, { signal: "early-notified", timeout_s: 3600 });
    expect(wait.status).toBe("received");
    return wait.id;
  } },
  { entry: "quorum vote", outcome: "received", drive: async (run) => {
    const wait = await open(run, { signal: "decision", quorum: { count: 2 }, timeout_s: 3600 });
    await send(run, "decision", { response: "approve", responder: "kim" });
    expect((await settledWait(app, wait.id, 0)).status).toBe("waiting"); // one vote: not yet
    await send(run, "decision", { response: "approve", responder: "lee" });
    return wait.id;
  } },
  { entry: "timer", outcome: "received", drive: async (run) => {
    const wait = await open(run, { signal: "nap", timer: { delay_s: 60 }, timeout_s: 3600 });
    await advanceClock(app, 60);
    return wait.id;
  } },
  { entry: "sensor", outcome: "received", drive: async (run) => (await open(run, { signal: "probe", sensor: { url: `${sensorUrl}/ready`, pointer: "/ready", equals: true, interval_s: 1, max_polls: 3 }, timeout_s: 3600 })).id },
  { entry: "composite (all: last member received)", outcome: "received", drive: async (run) => {
    const parent = await open(run, { signal: "both", all: [{ signal: "approval" }, { signal: "payment" }] });
    await send(run, "approval", { a: 1 });
    await send(run, "payment", { p: 2 });
    return parent.id;
  } },
  { entry: "composite (any: first member received)", outcome: "received", drive: async (run) => {
    const parent = await open(run, { signal: "either", any: [{ signal: "approval" }, { signal: "payment" }] });
    await send(run, "payment", { p: 2 });
    return parent.id;
  } },
  // timed out
  { entry: "timeout job", outcome: "timed_out", drive: async (run) => {
    const wait = await open(run, { signal: "approval", timeout_s: 60 });
    await advanceClock(app, 60);
    return wait.id;
  } },
  { entry: "open_wait with a past deadline", outcome: "timed_out", drive: async (run) => {
    const wait = await open(run, { signal: "approval", timeout_at: pastDeadline() });
    expect(wait.status).toBe("timed_out");
    return wait.id;
  } },
  { entry: "opening transaction with a past deadline", outcome: "timed_out", drive: async (run) => {
    const wait = await open(run, { signal: "early-notified", timeout_at: pastDeadline() });
    expect(wait.status).toBe("timed_out");
    return wait.id;
  } },
  { entry: "sensor out of polls", outcome: "timed_out", drive: async (run) => (await open(run, { signal: "probe", sensor: { url: `${sensorUrl}/down`, interval_s: 1, max_polls: 1 } })).id },
  { entry: "composite (all: a member timed out)", outcome: "timed_out", drive: async (run) => {
    const parent = await open(run, { signal: "both", all: [{ signal: "approval" }, { signal: "payment", timeout_s: 60 }] });
    await advanceClock(app, 60);
    return parent.id;
  } },
  { entry: "signal after the timeout (rejected, changes nothing)", outcome: "timed_out", drive: async (run) => {
    const wait = await open(run, { signal: "approval", timeout_s: 60 });
    await advanceClock(app, 60);
    expect((await settledWait(app, wait.id)).status).toBe("timed_out");
    expect(await send(run, "approval", {}, 409)).toMatchObject({ outcome: "rejected_not_waiting" });
    return wait.id;
  } },
  // cancelled
  { entry: "cancel wait", outcome: "cancelled", drive: async (run) => {
    const wait = await open(run, { signal: "approval", timeout_s: 3600 });
    expect((await app.api(`/waits/${wait.id}/cancel`, { method: "POST" })).status).toBe(200);
    return wait.id;
  } },
  { entry: "cancel run", outcome: "cancelled", drive: async (run) => {
    const wait = await open(run, { signal: "nap", timer: { delay_s: 3600 }, timeout_s: 7200 });
    expect((await app.api(`/runs/${run}/cancel`, { method: "POST", json: { reason: "parity" } })).status).toBe(200);
    return wait.id;
  } },
  { entry: "composite (all: a member cancelled)", outcome: "cancelled", drive: async (run) => {
    const parent = await open(run, { signal: "both", all: [{ signal: "approval" }, { signal: "payment" }] });
    const member = await memberOf(run, parent.id, "approval");
    expect((await app.api(`/waits/${member}/cancel`, { method: "POST" })).status).toBe(200);
    return parent.id;
  } },
  // signal vs timeout, the other order: the timeout job that runs late changes nothing
  { entry: "timeout job after the signal (changes nothing)", outcome: "received", drive: async (run) => {
    const wait = await open(run, { signal: "approval", timeout_s: 3600 });
    await send(run, "approval", {});
    expect(await expireWait(app.deps, wait.id)).toBe("not_waiting");
    return wait.id;
  } },
];

/** Resolves once the wait's id was NOTIFYed on the wait channel. */
const wokenUp = (waitId: string) => waitFor(`a NOTIFY for ${waitId}`, () => notified.has(waitId));

describe("a wait leaving `waiting`, through every entry point", () => {
  it.each(TABLE.map((row, i) => ({ ...row, run: `parity-${i}` })))("$entry: $outcome", async ({ run, outcome, drive }) => {
    const waitId = await drive(run);

    // The transition committed: its state, its wake-up, and none of the wait's own jobs left.
    const wait = await settledWait(app, waitId);
    expect(wait.status).toBe(outcome);
    await wokenUp(waitId);
    const own = ["expire", "timer", "sensor"].map((prefix) => `${prefix}:${waitId}`);
    const [jobs] = await app.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where key = any(${own})`;
    expect(jobs!.n).toBe(0);

    await drainJobs(app); // nothing can fire or call back any more
    const history = (await body(app.api(`/runs/${run}/events?limit=500`))).items as Array<{ id: string; type: string; wait_id: string | null; signal_id: string | null }>;
    const resolutions = history.filter((e) => e.wait_id === waitId && Object.values(RESOLUTION_EVENTS).includes(e.type as never));
    expect(resolutions.map((e) => e.type)).toEqual([RESOLUTION_EVENTS[outcome]]);
    expect(history.filter((e) => e.wait_id === waitId).at(-1)).toEqual(resolutions[0]); // nothing about it after

    const callbacks = engine.received.filter((cb) => cb.json.wait?.id === waitId && Object.values(RESOLUTION_EVENTS).includes(cb.json.type as never));
    expect(callbacks).toHaveLength(1);
    expect(callbacks[0]!.json.type).toBe(RESOLUTION_EVENTS[outcome]);
    expect(callbacks[0]!.headers["webhook-id"]).toBe(resolutions[0]!.id);
    expect(callbacks[0]!.json.wait.status).toBe(outcome);
    expect((await settledWait(app, waitId, 0)).delivery).toMatchObject({ status: "delivered", attempts: 1 });

    // Received: by an accepted signal of the run (received, or buffered and consumed) that names
    // the wait; the run's sequences stay gapless.
    const log = (await body(app.api(`/runs/${run}/signals?limit=500`))).items as Array<{ id: string; outcome: string; sequence: number | null; wait_id: string | null }>;
    if (outcome === "received") {
      const signal = log.find((s) => s.id === wait.result.signal_id);
      expect(signal).toMatchObject({ wait_id: waitId, sequence: wait.result.sequence });
      expect(["received", "buffered"]).toContain(signal!.outcome);
      expect(resolutions[0]!.signal_id).toBe(signal!.id);
    } else {
      expect(wait.result).toBeNull();
    }
    const sequences = log.map((s) => s.sequence).filter((s) => s !== null).sort((a, b) => a - b);
    expect(sequences).toEqual(sequences.map((_, i) => i + 1));
  });
});
