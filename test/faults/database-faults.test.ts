import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.ts";
import { API_KEY } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { badSamples, Load, useManagementKey, type Sample } from "./support/load.ts";
import { answers200, onDatabase, spawnService, type ServiceProcess } from "../helpers/service-process.ts";

// signalbox (the real process) under load while its Postgres restarts (fast, immediate), goes
// away for a while, freezes (SIGSTOP: nothing answers, connections stay open), or has its
// connections killed every second. The process must stay up;
// every request answers 2xx/4xx, or 503 with Retry-After, within 2 s; /readyz is 503 while the
// database is away and 200 after; callbacks and timeouts flow again within 5 s of Postgres being
// back; nothing accepted is lost and no wait resolves twice; SIGTERM exits 0.
//
// FAULT_TRIALS restarts of each mode (default 3: 6 restarts in `npm test`; FAULT_TRIALS=10 is
// the long run, 20 restarts). This Postgres is the test's own: the shared one is not touched.
const TRIALS = Number(process.env.FAULT_TRIALS ?? 3);
const LONG_OUTAGE_S = Number(process.env.FAULT_OUTAGE_S ?? 20);
const FROZEN_S = Number(process.env.FAULT_FROZEN_S ?? 8);
const RECOVERY_MS = 5_000;

let pg: PrivatePostgres;
let svc: ServiceProcess;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
const figures: Array<{ fault: string; recoveryMs: number; readyMs: number; max503Ms: number; n503: number; requests: number }> = [];
const allSamples: Sample[] = [];
const loads: Load[] = [];

beforeAll(async () => {
  pg = await startPrivatePostgres("faults");
  engine = await startCallbackReceiver();
  // Workers go stale after 3 s, not 1: a restart of the database must not look like their death.
  svc = await spawnService(onDatabase(pg.url, { SIGNALBOX_WORKER_STALE_S: "3", SIGNALBOX_DELIVERY_BACKOFF_S: "0.2", LOG_LEVEL: "warn" }));
  await answers200(svc, "/readyz", 60_000);
  useManagementKey(API_KEY);
  expect((await svc.api("/signal-types/load", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);
}, 120_000);

afterAll(async () => {
  if (svc?.alive()) svc.child.kill("SIGKILL");
  await engine?.close();
  await pg?.destroy();
  console.log(`database faults: ${JSON.stringify(figures)}`);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const callbackFor = (waitId: string, type: string) => engine.received.find((cb) => cb.json.wait.id === waitId && cb.json.type === type);

/** waitFor's options for a probe that must succeed by `deadline` (performance.now() ms); a probe's error counts as "not yet". */
const by = (deadline: number) => ({
  timeoutMs: Math.max(0, deadline - performance.now()),
  until: (v: unknown) => v !== undefined,
  context: () => svc.output().split("\n").slice(-20).join("\n"),
});
const orUndefined = <T>(probe: () => Promise<T | undefined>) => () => probe().catch(() => undefined);

/** Opens a wait, retrying while signalbox answers 503 (the database may still be coming back). */
async function openProbeWait(run: string, timeoutS?: number): Promise<string> {
  const id = await waitFor(`open ${run}`, orUndefined(async () => {
    const res = await svc.api(`/runs/${run}/waits`, { method: "POST", json: { signal: "load", callback_url: engine.url, ...(timeoutS ? { timeout_s: timeoutS } : {}) }, timeoutMs: 3000 });
    return res.status === 201 ? ((await res.json()) as { id: string }).id : undefined;
  }), by(performance.now() + 10_000));
  return id!;
}

/**
 * One fault under load. Before it, a wait that times out in a second and one to be signalled
 * after; `fault` does the damage and resolves when Postgres is back (the time recovery counts from).
 */
async function trial(name: string, fault: () => Promise<void>, duringOutage?: () => Promise<void>) {
  const tag = `${name}-${figures.length}`;
  const timesOut = await openProbeWait(`${tag}-timeout`, 1);
  const signalled = await openProbeWait(`${tag}-signal`);
  const load = new Load(svc, engine.url, { ratePerS: 150, concurrency: 24, prefix: tag });
  loads.push(load);
  load.start();
  await sleep(500);
  await fault();
  const back = performance.now();
  await duringOutage?.();
  // Callbacks: a signal sent now (retried while 503) is delivered; the timeout fires and is delivered.
  const signalledAt = (await waitFor(`${tag}: signal accepted`, orUndefined(async () => {
    const res = await fetch(`${svc.baseUrl}/signals/${tag}-signal/load`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}", signal: AbortSignal.timeout(2500) });
    return res.status === 202 ? performance.now() : undefined;
  }), by(back + RECOVERY_MS)))!;
  const received = (await waitFor(`${tag}: signal callback`, () => callbackFor(signalled, "signal.received"), by(back + RECOVERY_MS)))!;
  const timedOut = (await waitFor(`${tag}: timeout callback`, () => callbackFor(timesOut, "signal.timeout"), by(Math.max(back, received.at) + RECOVERY_MS)))!;
  const ready = (await waitFor(`${tag}: /readyz 200`, orUndefined(async () => ((await svc.api("/readyz", { timeoutMs: 2500 })).status === 200 ? performance.now() : undefined)), by(back + RECOVERY_MS)))!;
  await sleep(300);
  await load.stop();
  allSamples.push(...load.samples);
  const s503 = load.samples.filter((s) => s.status === 503);
  figures.push({
    fault: name,
    recoveryMs: Math.round(Math.max(received.at, timedOut.at, signalledAt) - back),
    readyMs: Math.round(ready - back),
    max503Ms: Math.round(Math.max(0, ...s503.map((s) => s.ms - s.heldMs))),
    n503: s503.length,
    requests: load.samples.length,
  });
  expect(svc.alive(), svc.output()).toBe(true);
  expect(badSamples(load.samples)).toEqual([]);
  expect(load.samples.filter((s) => s.status === 201 || s.status === 202).length).toBeGreaterThan(0);
}

/** /readyz while Postgres is away: 503, answered within 2 s. */
async function expectNotReady() {
  const started = performance.now();
  const res = await svc.api("/readyz", { timeoutMs: 2500 });
  expect(performance.now() - started).toBeLessThan(2000);
  expect(res.status).toBe(503);
  const body = (await res.json()) as { checks: { database: boolean } };
  expect(body.checks.database).toBe(false);
}

describe("database faults under load", () => {
  for (let i = 0; i < TRIALS; i++) {
    for (const mode of ["fast", "immediate"] as const) {
      it(`pg_ctl restart -m ${mode} (trial ${i + 1}/${TRIALS})`, () => trial(`restart-${mode}`, () => pg.restart(mode)), 60_000);
    }
  }

  it(`Postgres away for ${LONG_OUTAGE_S} s`, async () => {
    await trial("outage", async () => {
      await pg.stop("fast");
      const until = performance.now() + LONG_OUTAGE_S * 1000;
      while (performance.now() < until) {
        await expectNotReady();
        await sleep(1000);
      }
      await pg.start();
    });
  }, 60_000 + LONG_OUTAGE_S * 1000);

  it(`Postgres frozen (SIGSTOP: a host gone silent, its connections open) for ${FROZEN_S} s`, async () => {
    await trial("frozen", async () => {
      await pg.freeze();
      try {
        const until = performance.now() + FROZEN_S * 1000;
        while (performance.now() < until) {
          await expectNotReady();
          await sleep(1000);
        }
      } finally {
        await pg.thaw();
      }
    });
  }, 60_000 + FROZEN_S * 1000);

  it("every signalbox connection killed every second for 8 s", async () => {
    await trial("terminate", async () => {
      for (let i = 0; i < 8; i++) {
        await pg.terminateBackends("signalbox");
        await sleep(1000);
      }
    });
  }, 90_000);

  it("a sender held for its reply (wait_s) when Postgres goes away gets its accepted answer (202, reply pending), not a 503", async () => {
    const slow = await startCallbackReceiver(() => sleep(4000).then(() => 204)); // the reply is still pending when Postgres stops
    try {
      const run = "held-reply";
      expect((await svc.api(`/runs/${run}/waits`, { method: "POST", json: { signal: "load", callback_url: slow.url } })).status).toBe(201);
      const held = fetch(`${svc.baseUrl}/signals/${run}/load?wait_s=30`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      await waitFor("the signal accepted (its callback on its way)", () => slow.received.length, { until: (n) => n === 1, timeoutMs: 5000 });
      await pg.stop("fast");
      const started = performance.now();
      const res = await held;
      expect(performance.now() - started).toBeLessThan(3000);
      expect(res.status).toBe(202);
      expect(await res.json()).toMatchObject({ outcome: "received", reply_pending: true });
    } finally {
      await pg.start().catch(() => {}); // already running when the test failed before stopping it
      await answers200(svc, "/readyz", 10_000);
      await slow.close();
    }
  }, 40_000);

  it("lost nothing: every 202 is stored, no wait resolved twice, every resolution called back with one webhook-id", async () => {
    const ids = [...new Set(loads.flatMap((l) => [...l.accepted.keys()]))];
    const stored = await pg.admin<{ id: string }[]>`select id from signalbox.signals where id in ${pg.admin(ids)} and sequence is not null`;
    expect(stored.length).toBe(ids.length);
    const twice = await pg.admin`
      select wait_id, count(*)::int as n from signalbox.events
      where type in ('signal.received', 'signal.timeout', 'signal.cancelled') group by wait_id having count(*) > 1`;
    expect(twice).toEqual([]);
    // Every resolved wait with a callback is delivered (retries allowed: always the same webhook-id).
    await waitFor("all callbacks delivered", async () => {
      const [row] = await pg.admin<{ n: number }[]>`
        select count(*)::int as n from signalbox.waits where status <> 'waiting' and callback_url is not null and delivery_status <> 'delivered'`;
      return row!.n;
    }, { until: (undelivered) => undelivered === 0, timeoutMs: 30_000, context: () => svc.output().split("\n").slice(-20).join("\n") });
    const byWait = new Map<string, Set<string>>();
    for (const cb of engine.received) byWait.set(cb.json.wait.id, (byWait.get(cb.json.wait.id) ?? new Set()).add(String(cb.headers["webhook-id"])));
    expect([...byWait.values()].filter((ids) => ids.size > 1)).toEqual([]);
    expect(allSamples.length).toBeGreaterThan(0);
    expect(svc.alive()).toBe(true);
  }, 60_000);

  it("SIGTERM while Postgres is away exits 0", async () => {
    await pg.stop("immediate");
    await expectNotReady();
    svc.child.kill("SIGTERM");
    const exit = await Promise.race([svc.exited, sleep(10_000).then(() => "timeout")]);
    expect(exit, svc.output()).toBe(0);
    await pg.start();
  }, 30_000);
});
