import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver, type ReceivedCallback } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { DeliveryEngine } from "../../src/delivery/delivery-engine.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { createTestDatabase, startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// A burst of callbacks to one endpoint that answers, but takes several seconds to take them all
// (issue 13, item 2): they queue at the endpoint gate in order, none is turned away to come back
// a second later (the gate used to turn away whatever had waited a second, so the back of a
// 10,000-timeout burst came late by a second or more, in gaps), and the delivery jobs let go of
// the queue after a second, so it holds no job slot. The jobs that keep what they let go of owed
// send none of it again, whether they come due while it still waits its turn or once it is
// delivered; if the process stops first, they deliver it.
// Nothing is timed: what is asserted is what was sent, what was turned away and what is owed.

const WAITS = 300;
/** 2 at a time, each answered in 20 ms: about 100 a second, so the burst queues for about 3 s. */
const ENV = { SIGNALBOX_DELIVERY_ENDPOINT_CONCURRENCY: "2" };
const slowly = () => new Promise<number>((r) => setTimeout(() => r(204), 20));

let app: TestApp;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  app = await startTestApp({ env: ENV });
  await declareType(app, "approval", { auth: { scheme: "none" } });
});
afterAll(async () => {
  await app?.close();
  await Promise.all(closers.map((c) => c()));
});

async function receiver() {
  const r = await startCallbackReceiver(slowly);
  closers.push(r.close);
  return r;
}

async function metric(target: TestApp, name: string, reason: string): Promise<number> {
  const text = await (await fetch(`${target.baseUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{reason="${reason}"}`));
  return line ? Number(line.split(" ").at(-1)) : 0;
}

async function openBurst(target: TestApp, prefix: string, callbackUrl: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < WAITS; i++) ids.push((await openWait(target, `${prefix}-${i}`, { signal: "approval", timeout_s: 60, callback_url: callbackUrl }, 201)).body.id);
  return ids;
}

const webhookIds = (received: ReceivedCallback[]) => received.map((cb) => String(cb.headers["webhook-id"]));

async function deliveryStates(target: TestApp, ids: string[]) {
  return target.database.sql<{ delivery_status: string; delivery_attempts: number }[]>`
    select delivery_status, delivery_attempts from signalbox.waits where id = any(${ids}::text[])`;
}

/**
 * deliver_callback jobs still to run (`later`: not running, and not due yet, or not for `inS` at
 * least; `due`: due now or running), and the wait ids they name.
 */
async function owedJobs(target: TestApp, which: "all" | "later" | "due" = "all", inS = 0) {
  const jobs = await target.database.sql<{ payload: unknown }[]>`
    select j.payload from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
    where t.identifier = 'deliver_callback'
      and (${which} = 'all' or (${which} = 'later') = (j.locked_at is null and j.run_at > now() + ${inS} * interval '1 second'))`;
  const id = (item: unknown) => (typeof item === "string" ? item : (item as { id: string }).id);
  return jobs.flatMap((j) => (Array.isArray(j.payload) ? j.payload.map(id) : [id(j.payload)]));
}

describe("a burst to one endpoint that takes seconds to answer it all", () => {
  it("goes out in one queue: every callback once, none turned away, and the jobs let go of it", { timeout: 120_000 }, async () => {
    const engine = await receiver();
    const ids = await openBurst(app, "burst", engine.url);
    const busyBefore = await metric(app, "signalbox_deliveries_deferred_total", "endpoint_busy");
    await advanceClock(app, 60); // all time out together: three batch jobs of 100 callbacks

    // A second in, the jobs have let go of the queue (none runs): the jobs that keep it owed are due later.
    await waitFor("the jobs let go of the queue", async () => [await owedJobs(app, "due"), await owedJobs(app, "later")], {
      until: ([running, later]) => running!.length === 0 && later!.length > 0,
      timeoutMs: 30_000,
    });
    expect((await owedJobs(app, "later")).every((id) => ids.includes(id))).toBe(true);
    expect(engine.received.length).toBeLessThan(WAITS * 0.75);
    // Due now, while most of the queue still waits its turn: they send none of it again, and
    // leave no job like them behind for what is still queued (the jobs that let go of it owe it;
    // one more a job that came due would pile them up). A stray one is no pile-up: a machine
    // busy enough to stall the queue a second makes the endpoint look stuck, and a callback it
    // turned away is a job's to send again.
    await advanceClock(app, 60);
    await waitFor("the jobs that kept it owed ran", () => owedJobs(app, "due"), { until: (owed) => owed.length === 0, timeoutMs: 10_000 });
    expect(engine.received.length).toBeLessThan(WAITS);
    expect((await owedJobs(app, "later", 30)).length).toBeLessThan(WAITS / 10);

    await engine.waitFor(WAITS, 60_000);
    await waitFor("every delivery recorded", async () => (await deliveryStates(app, ids)).filter((w) => w.delivery_status === "delivered").length, {
      until: (n) => n === WAITS,
      timeoutMs: 30_000,
    });
    await advanceClock(app, 60);
    await waitFor("the jobs that kept it owed ran", () => owedJobs(app), { until: (left) => left.length === 0, timeoutMs: 30_000 });
    // Each sent once: nothing was turned away, and no job sent again what was queued.
    expect(new Set(webhookIds(engine.received)).size).toBe(WAITS);
    expect(engine.received.length).toBe(WAITS);
    expect(await metric(app, "signalbox_deliveries_deferred_total", "endpoint_busy")).toBe(busyBefore);
    expect((await deliveryStates(app, ids)).every((w) => w.delivery_attempts === 1)).toBe(true);
  });

  it("still queued when the process stops: the jobs that kept it owed deliver the rest after a restart", { timeout: 120_000 }, async () => {
    const database = await createTestDatabase();
    closers.push(database.drop);
    const first = await startTestApp({ env: ENV, databaseUrl: database.url });
    await declareType(first, "approval", { auth: { scheme: "none" } });
    const engine = await receiver();
    const ids = await openBurst(first, "stopped", engine.url);
    await advanceClock(first, 60);
    // A second in, the jobs have let go of the queue; stop with most of it unsent.
    await engine.waitFor(1, 30_000);
    await waitFor("the jobs let go of the queue", () => owedJobs(first, "later"), { until: (owed) => owed.length > 0, timeoutMs: 30_000 });
    await first.close();
    const sentBeforeStop = new Set(webhookIds(engine.received)).size;
    expect(sentBeforeStop).toBeLessThan(WAITS);

    const second = await startTestApp({ env: ENV, databaseUrl: database.url });
    closers.unshift(second.close); // before the database is dropped
    await advanceClock(second, 60); // the jobs that kept the rest owed are due
    await waitFor("every callback, after the restart", () => new Set(webhookIds(engine.received)).size, { until: (n) => n === WAITS, timeoutMs: 60_000 });
    await waitFor("every delivery recorded", async () => (await deliveryStates(second, ids)).filter((w) => w.delivery_status === "delivered").length, {
      until: (n) => n === WAITS,
      timeoutMs: 30_000,
    });
  });
});

describe("a callback let go of while queued, then answered with a retryable status", () => {
  it("is retried after the wait's backoff: the job that kept it owed sends nothing earlier", async () => {
    const idle = await startTestApp({ worker: false, env: { SIGNALBOX_DELIVERY_ENDPOINT_FAILURES: "1000", SIGNALBOX_DELIVERY_BACKOFF_S: "60" } });
    closers.unshift(idle.close);
    await declareType(idle, "approval", { auth: { scheme: "none" } });
    // One at a time: the first two answered 204 in 600 ms, so the third waits its turn past the
    // job's second, is let go of, then sent and answered 503.
    const engine = await startCallbackReceiver((n) => (n <= 2 ? new Promise((r) => setTimeout(() => r(204), 600)) : 503));
    closers.push(engine.close);
    const ids: string[] = [];
    for (const run of ["first", "second", "third"]) {
      ids.push((await openWait(idle, `retry-${run}`, { signal: "approval", callback_url: engine.url }, 201)).body.id);
      expect((await intake(idle, `retry-${run}`, "approval", "{}")).status).toBe(202);
    }
    const third = ids[2]!;
    const delivery = new DeliveryEngine(idle.deps, { perEndpoint: 1, failuresToBackOff: 1000 });
    closers.push(() => delivery.stop());
    await delivery.deliver(ids);
    const sql = idle.database.sql;
    const attempts = async () => (await sql<{ n: number }[]>`select delivery_attempts as n from signalbox.waits where id = ${third}`)[0]!.n;
    await waitFor("the third's first attempt recorded", attempts, { until: (n) => n === 1, timeoutMs: 10_000 });

    // Its retry is due after the wait's backoff, under its key; the batch job that kept it owed
    // while it waited its turn is due sooner, and names the attempt it kept owed.
    const jobs = await sql<{ key: string | null; payload: unknown; due_in_s: number }[]>`
      select j.key, j.payload, extract(epoch from j.run_at - now())::float8 as due_in_s
      from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
      where t.identifier = 'deliver_callback' order by j.run_at`;
    const retry = jobs.find((j) => j.key === `deliver:${third}`)!;
    // (Not the intake's own batch jobs, which name waits alone: no worker ran them here.)
    const keeper = jobs.find((j) => j.key === null && Array.isArray(j.payload) && j.payload.some((c) => c.id === third))!;
    expect(retry.due_in_s).toBeGreaterThan(50);
    expect(keeper.due_in_s).toBeLessThan(retry.due_in_s);

    // The keeper's turn (as the worker runs it): the retry is not sent before its backoff.
    const before = engine.received.length;
    await delivery.deliver(keeper.payload as Array<{ id: string; attempts: number; round: number }>);
    expect(engine.received.length).toBe(before);
    expect(await attempts()).toBe(1);
  });
});
