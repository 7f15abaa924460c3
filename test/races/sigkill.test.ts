import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver, type ReceivedCallback } from "../helpers/callback-receiver.ts";
import { drainJobs } from "../helpers/race-gates.ts";
import { API_KEY, CALLBACK_SECRET, createTestDatabase } from "../helpers/test-app.ts";
import { freePort } from "../../src/core/free-port.ts";

// A 202 means committed: SIGKILL the real service right after one and nothing is lost. The
// callback still arrives (at least once, always with the same webhook-id), timers that passed
// while the process was down fire when it is back, and pending timers still fire.

interface Service {
  baseUrl: string;
  child: ChildProcess;
  exited: Promise<number | string | null>;
  logs: string[];
  api(p: string, init?: { method?: string; json?: unknown }): Promise<Response>;
}

const NODE = path.resolve("node_modules/.bin/node");
const children: ChildProcess[] = [];


/** `node src/main.ts` as a child process; resolves when it logs "signalbox listening". */
async function startService(databaseUrl: string): Promise<Service> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnService(databaseUrl, await freePort());
    } catch (err) {
      // The free port was taken between our probe and the child's listen: try another.
      if (attempt >= 3 || !String(err).includes("EADDRINUSE")) throw err;
    }
  }
}

async function spawnService(databaseUrl: string, port: number): Promise<Service> {
  const child = spawn(NODE, ["src/main.ts"], {
    cwd: path.resolve("."),
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      SIGNALBOX_API_KEYS: API_KEY,
      SIGNALBOX_CALLBACK_SECRET: CALLBACK_SECRET,
      SIGNALBOX_WORKER_STALE_S: "1",
      SIGNALBOX_POLL_INTERVAL_MS: "100",
      SIGNALBOX_DELIVERY_BACKOFF_S: "0.1",
      LOG_LEVEL: "info",
    },
  });
  children.push(child);
  const logs: string[] = [];
  const exited = new Promise<number | string | null>((resolve) => child.once("close", (code, signal) => resolve(signal ?? code)));
  const listening = new Promise<void>((resolve, reject) => {
    let buffered = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("utf8");
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        logs.push(line);
        if (line.includes('"signalbox listening"')) resolve();
      }
    });
    child.stderr!.on("data", (chunk: Buffer) => logs.push(chunk.toString("utf8")));
    void exited.then((how) => reject(new Error(`service exited (${how}) before listening:\n${logs.join("\n")}`)));
  });
  await listening;
  const baseUrl = `http://127.0.0.1:${port}`;
  return {
    baseUrl,
    child,
    exited,
    logs,
    api: (p, init = {}) =>
      fetch(baseUrl + p, {
        method: init.method ?? "GET",
        headers: { authorization: `Bearer ${API_KEY}`, ...(init.json !== undefined ? { "content-type": "application/json" } : {}) },
        body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
      }),
  };
}

type Json = Record<string, any>;
let db: { url: string; drop(): Promise<void> };
let sql: postgres.Sql;
let hangWaitId = "";
let releaseHung!: () => void;
const hung = new Promise<number>((resolve) => (releaseHung = () => resolve(204)));
// The engine answers at once, except the first delivery for the "hang" wait, which it holds
// (the service is killed while that request is in flight).
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;

beforeAll(async () => {
  db = await createTestDatabase();
  sql = postgres(db.url, { max: 1, onnotice: () => {} });
  engine = await startCallbackReceiver((_n, cb) => (cb.json.wait.id === hangWaitId && callbacksFor(hangWaitId).length === 1 ? hung : 204));
});
afterAll(async () => {
  releaseHung();
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await sql?.end();
  await engine?.close();
  await db?.drop();
});

const callbacksFor = (waitId: string): ReceivedCallback[] => engine.received.filter((cb) => cb.json.wait.id === waitId);

async function callbacksArrived(waitId: string, n: number, timeoutMs = 15_000): Promise<ReceivedCallback[]> {
  const deadline = Date.now() + timeoutMs;
  while (callbacksFor(waitId).length < n) {
    await engine.waitFor(engine.received.length + 1, Math.max(1, deadline - Date.now())).catch(() => {
      throw new Error(`expected ${n} callback(s) for wait ${waitId}, got ${callbacksFor(waitId).length}`);
    });
  }
  return callbacksFor(waitId);
}

async function openWait(svc: Service, run: string, body: Json): Promise<Json> {
  const res = await svc.api(`/runs/${run}/waits`, { method: "POST", json: { signal: "approval", callback_url: engine.url, ...body } });
  expect(res.status).toBe(201);
  return (await res.json()) as Json;
}

const sendSignal = (svc: Service, run: string) =>
  fetch(`${svc.baseUrl}/signals/${run}/approval`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"approved":true}' });

async function resolutionEvents(svc: Service, run: string): Promise<Json[]> {
  const body = (await (await svc.api(`/runs/${run}/events`)).json()) as { items: Json[] };
  return body.items.filter((e) => ["signal.received", "signal.timeout", "signal.cancelled"].includes(e.type));
}

describe("SIGKILL right after a 202", () => {
  it("loses nothing: the signal, its callback, timers due during the downtime and timers still pending", async () => {
    const first = await startService(db.url);
    expect((await first.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);

    const signalled = await openWait(first, "kill-signal", {});
    const hang = await openWait(first, "kill-hang", {});
    hangWaitId = hang.id;
    const pending = await Promise.all([0, 1, 2].map((i) => openWait(first, `kill-pending-${i}`, { timeout_s: 3 })));

    // The engine is mid-delivery for "kill-hang" when the process dies: the job is locked by a dead worker.
    expect((await sendSignal(first, "kill-hang")).status).toBe(202);
    await callbacksArrived(hang.id, 1);

    const dueWhileDown = await openWait(first, "kill-down", { timeout_s: 1 });
    const res = await sendSignal(first, "kill-signal");
    if (res.status === 202) first.child.kill("SIGKILL");
    expect(res.status).toBe(202);
    expect(await first.exited).toBe("SIGKILL");
    const answer = (await res.json().catch(() => undefined)) as Json | undefined;

    // While nothing runs: the 202 was committed, and the short timer comes due with nobody to fire it.
    const waitMs = Date.parse(dueWhileDown.timeout_at) - Date.now() + 50;
    if (waitMs > 0) await new Promise((r) => setTimeout(r, waitMs)); // the downtime itself is the point here
    const [down] = await sql<{ status: string; due: boolean }[]>`
      select status, timeout_at <= now() as due from signalbox.waits where id = ${dueWhileDown.id}`;
    expect(down).toEqual({ status: "waiting", due: true });
    const [committed] = await sql<{ status: string }[]>`select status from signalbox.waits where id = ${signalled.id}`;
    expect(committed!.status).toBe("received");

    const restartedAt = performance.now();
    const second = await startService(db.url);

    // The signal: received, exactly one accepted signal, and the engine saw its event id.
    const wait = (await (await second.api(`/waits/${signalled.id}?wait_s=10`)).json()) as Json;
    expect(wait.status).toBe("received");
    if (answer) expect(wait.result.signal_id).toBe(answer.signal_id);
    const log = ((await (await second.api("/runs/kill-signal/signals")).json()) as { items: Json[] }).items;
    expect(log.map((s) => [s.outcome, s.sequence])).toEqual([["received", 1]]);
    const [received] = await resolutionEvents(second, "kill-signal");
    const signalCallbacks = await callbacksArrived(signalled.id, 1);
    expect(signalCallbacks.every((cb) => cb.headers["webhook-id"] === received!.id && cb.json.type === "signal.received")).toBe(true);

    // The delivery the dead process held is released and retried with the same webhook-id.
    const hangCallbacks = await callbacksArrived(hang.id, 2);
    const [hangEvent] = await resolutionEvents(second, "kill-hang");
    expect(new Set(hangCallbacks.map((cb) => cb.headers["webhook-id"]))).toEqual(new Set([hangEvent!.id]));

    // Timers: the one due during the downtime and the pending ones fire once each, after the restart.
    for (const w of [dueWhileDown, ...pending]) {
      const settled = (await (await second.api(`/waits/${w.id}?wait_s=10`)).json()) as Json;
      expect(settled.status).toBe("timed_out");
      const [cb] = await callbacksArrived(w.id, 1);
      expect(cb!.json.type).toBe("signal.timeout");
      expect(cb!.at).toBeGreaterThan(restartedAt);
    }

    await drainJobs(sql);
    for (const w of [dueWhileDown, ...pending]) {
      expect(callbacksFor(w.id)).toHaveLength(1);
      expect((await resolutionEvents(second, w.run_id)).map((e) => e.type)).toEqual(["signal.timeout"]);
    }
    expect((await resolutionEvents(second, "kill-signal")).map((e) => e.type)).toEqual(["signal.received"]);
    const states = await sql<{ id: string; delivery_status: string }[]>`select id, delivery_status from signalbox.waits`;
    expect(states.every((s) => s.delivery_status === "delivered")).toBe(true);

    releaseHung();
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });
});
