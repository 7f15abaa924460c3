import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver, type ReceivedCallback } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { openWait as open } from "../helpers/http.ts";
import { drainJobs } from "../helpers/race-gates.ts";
import { killServices, onDatabase, startService, type ServiceProcess as Service } from "../helpers/service-process.ts";
import { createTestDatabase } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// A 202 means committed: SIGKILL the real service right after one and nothing is lost. The
// callback still arrives (at least once, always with the same webhook-id), timers that passed
// while the process was down fire when it is back, and pending timers still fire.

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
  killServices();
  await sql?.end();
  await engine?.close();
  await db?.drop();
});

const callbacksFor = (waitId: string): ReceivedCallback[] => engine.received.filter((cb) => cb.json.wait.id === waitId);

const callbacksArrived = (waitId: string, n: number): Promise<ReceivedCallback[]> =>
  waitFor(`${n} callback(s) for wait ${waitId}`, () => callbacksFor(waitId), { until: (cbs) => cbs.length >= n, timeoutMs: 15_000 });

async function openWait(svc: Service, run: string, spec: Json): Promise<Json> {
  return (await open(svc, run, { signal: "approval", callback_url: engine.url, ...spec }, 201)).body;
}

const startOnTestDatabase = () => startService(onDatabase(db.url));

const sendSignal = (svc: Service, run: string) =>
  fetch(`${svc.baseUrl}/signals/${run}/approval`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"approved":true}' });

async function resolutionEvents(svc: Service, run: string): Promise<Json[]> {
  const body = (await (await svc.api(`/runs/${run}/events`)).json()) as { items: Json[] };
  return body.items.filter((e) => ["signal.received", "signal.timeout", "signal.cancelled"].includes(e.type));
}

describe("SIGKILL right after a 202", () => {
  it("loses nothing: the signal, its callback, timers due during the downtime and timers still pending", async () => {
    const first = await startOnTestDatabase();
    expect((await first.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);

    const signalled = await openWait(first, "kill-signal", {});
    const hang = await openWait(first, "kill-hang", {});
    hangWaitId = hang.id;
    const pending = await Promise.all([0, 1, 2].map((i) => openWait(first, `kill-pending-${i}`, { timeout_s: 600 })));

    // The engine is mid-delivery for "kill-hang" when the process dies: the job is locked by a dead worker.
    expect((await sendSignal(first, "kill-hang")).status).toBe(202);
    await callbacksArrived(hang.id, 1);

    const dueWhileDown = await openWait(first, "kill-down", { timeout_s: 60 });
    const res = await sendSignal(first, "kill-signal");
    if (res.status === 202) first.child.kill("SIGKILL");
    expect(res.status).toBe(202);
    expect(await first.exited).toBe("SIGKILL");
    const answer = (await res.json().catch(() => undefined)) as Json | undefined;

    // While nothing runs: the 202 was committed, and the short timer comes due with nobody to fire it.
    await advanceClock(sql, 60); // a minute of downtime
    const [down] = await sql<{ status: string; due: boolean }[]>`
      select status, timeout_at <= now() as due from signalbox.waits where id = ${dueWhileDown.id}`;
    expect(down).toEqual({ status: "waiting", due: true });
    const [committed] = await sql<{ status: string }[]>`select status from signalbox.waits where id = ${signalled.id}`;
    expect(committed!.status).toBe("received");

    const restartedAt = performance.now();
    const second = await startOnTestDatabase();

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
    const [stillPending] = await sql<{ n: number }[]>`
      select count(*)::int as n from signalbox.waits where id in ${sql(pending.map((w) => w.id))} and status = 'waiting' and timeout_at > now()`;
    expect(stillPending!.n).toBe(3);
    await advanceClock(sql, 600); // the pending ones come due with the new process running
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
