import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newId } from "../../src/core/ids.ts";
import { DeliveryEngine } from "../../src/delivery/delivery-engine.ts";
import { owedCallback } from "../../src/delivery/deliver-callback.ts";
import { acceptSignalsHandingOff, type IntakeItem } from "../../src/signals/accept-signals.ts";
import { findWaitWithEvent, waitWithEventFromJson, type WaitWithEventJson } from "../../src/waits/waits.queries.ts";
import { IntakeBatcher } from "../../src/signals/intake-batcher.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { advanceClock, runDueJobs } from "../helpers/clock.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { killServices, onDatabase, startService } from "../helpers/service-process.ts";
import { createTestDatabase, startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Intake hands the callbacks of the waits it receives to its own process's delivery engine
// (CallbackHandOff, db/functions/enqueue_callbacks.sql): their jobs are enqueued in the intake
// transaction, due 10 s later and with no NOTIFY, and the process that took the signals runs them
// as soon as it commits, then completes them. A worker runs one only should that process not:
// it died first, or its run failed.

const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  killServices();
  for (const close of closers.reverse()) await close();
});

/** What intake gives accept_signals for a signal to `run` (an approval, no idempotency key). */
const intakeItem = (run: string) => ({
  i: 0,
  id: `sg_${run.replace(/[^a-z0-9]/g, "").padEnd(26, "a").slice(0, 26)}`,
  run_id: run,
  signal: "approval",
  payload: "{}",
  payload_hash: null,
  idempotency_key: null,
  buffer_ttl_s: 0,
});
/** A first attempt that was delivered, as the delivery engine records it. */
const deliveredAttempt = (waitId: string) => ({ wait_id: waitId, attempts_before: 0, round_before: 0, verdict: "delivered", status_code: 204, error: null, duration_ms: 3, callback_host: "engine.invalid" });

const callbackJobs = (sql: postgres.Sql) =>
  sql<Array<{ id: string; payload: unknown[]; due_in_s: number }>>`
    select j.id::text, j.payload, extract(epoch from j.run_at - now())::float8 as due_in_s
    from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
    where t.identifier = 'deliver_callback' order by j.id`;

/** A signal for `run` as intake gives it to the batcher (an approval, no idempotency key). */
const signalItem = (run: string, payload = "{}"): IntakeItem => ({ id: newId("sg"), runId: run, signal: "approval", payload, payloadHash: null, idempotencyKey: null, bufferTtlS: 0 });

/**
 * An app with no worker, and intake handing its callbacks to a delivery engine of the test's:
 * only that engine delivers, and nothing NOTIFYs "jobs:insert" (a worker's heartbeat queues the sweep).
 */
async function handingOffApp(opts: { handOffRoom?: number } = {}) {
  const idle = await startTestApp({ worker: false });
  closers.push(() => idle.close());
  await declareType(idle, "approval");
  await idle.database.sql`insert into graphile_worker._private_tasks (identifier) values ('deliver_callback') on conflict do nothing`; // as a worker's start does
  const engine = new DeliveryEngine(idle.deps, { perEndpoint: 16, failuresToBackOff: 1000, ...opts });
  closers.push(() => engine.stop());
  return { idle, engine, batcher: new IntakeBatcher(idle.deps.db, { handOff: engine }) };
}

/** A receiver that holds its answers to the callbacks `held` picks until `answer()`. */
async function holdingReceiver(held: (n: number) => boolean) {
  let answer!: () => void;
  const answered = new Promise<void>((resolve) => (answer = resolve));
  const receiver = await startCallbackReceiver((n) => (held(n) ? answered.then(() => 204) : 204));
  closers.push(() => (answer(), receiver.close()));
  return { receiver, answer };
}

describe("a signal's callback, handed off", () => {
  let app: TestApp;
  let receiver: Awaited<ReturnType<typeof startCallbackReceiver>>;
  beforeAll(async () => {
    app = await startTestApp();
    receiver = await startCallbackReceiver();
    closers.push(() => app.close(), () => receiver.close());
    await declareType(app, "approval");
  });

  it("goes out from the process that took the signal, with no worker running: no NOTIFY wakes the workers, and its job is gone once it is delivered", async () => {
    const { idle, batcher } = await handingOffApp();
    const wait = (await openWait(idle, "hand-off-1", { signal: "approval", callback_url: receiver.url }, 201)).body;
    const listener = postgres(idle.databaseUrl, { max: 1, onnotice: () => {} });
    closers.push(() => listener.end());
    const wakeUps: string[] = [];
    await listener.listen("jobs:insert", (payload) => wakeUps.push(payload));

    expect(await batcher.accept(signalItem("hand-off-1", '{"ok":true}'))).toMatchObject({ outcome: "received", waitId: wait.id });
    const [callback] = await receiver.waitFor(1);
    expect(callback!.json).toMatchObject({ type: "signal.received", wait: { id: wait.id, status: "received" } });
    await waitFor("the handed-off job completed", () => callbackJobs(idle.database.sql), { until: (jobs) => jobs.length === 0 });
    await waitFor("the attempt recorded", async () => (await (await idle.api(`/waits/${wait.id}/deliveries`)).json()) as { items: unknown[] }, {
      until: (d) => d.items.length === 1,
    });
    expect(wakeUps).toEqual([]);
  });

  it("goes to the workers instead while the process has as many under way as it has room for, and only until they are let go of", async () => {
    const { receiver: hung } = await holdingReceiver(() => true);
    const { idle, engine, batcher } = await handingOffApp({ handOffRoom: 2 });
    const runs = ["room-1", "room-2", "room-3"];
    const waits = [];
    for (const run of runs) waits.push((await openWait(idle, run, { signal: "approval", callback_url: hung.url }, 201)).body);

    // One at a time: the first two are handed off and hang at their endpoint; the third finds no room.
    for (const [i, run] of runs.entries()) expect(await batcher.accept(signalItem(run))).toMatchObject({ outcome: "received", waitId: waits[i]!.id });
    expect(engine.hasRoom()).toBe(false);
    await hung.waitFor(2);
    // Owed by jobs due later: their handed-off jobs, or (let go of already) jobs of their own.
    const jobs = await callbackJobs(idle.database.sql);
    const waitIds = (payload: unknown) => (Array.isArray(payload) ? payload : [payload]).map((c) => (typeof c === "string" ? c : (c as { id: string }).id));
    expect(jobs.filter((j) => j.due_in_s > 5).flatMap((j) => waitIds(j.payload)).sort()).toEqual([waits[0]!.id, waits[1]!.id].sort());
    expect(jobs.filter((j) => j.due_in_s <= 0).map((j) => j.payload)).toEqual([[waits[2]!.id]]); // as add_jobs queues it, due now
    // Let go of after a second (jobs due after their time limit keep them owed): room again, though they still hang.
    await waitFor("room again", async () => engine.hasRoom(), { until: (room) => room, timeoutMs: 5_000 });
    expect(hung.received).toHaveLength(2);
  });

  it("goes out from the service's own intake (its worker running)", async () => {
    const wait = (await openWait(app, "hand-off-3", { signal: "approval", callback_url: receiver.url }, 201)).body;
    const before = receiver.received.length;
    expect((await intake(app, "hand-off-3", "approval", "{}")).status).toBe(202);
    const callbacks = await receiver.waitFor(before + 1);
    expect(callbacks.at(-1)!.json.wait.id).toBe(wait.id);
    await waitFor("the handed-off job completed", () => callbackJobs(app.database.sql), { until: (jobs) => jobs.length === 0 });
  });

  it("carries what a worker would read after the commit: the same callback, byte for byte", async () => {
    const payload = JSON.stringify({ note: "déjà vu ✓", nested: { list: [1, 2.5, null, "x"] }, big: 12345678901234567890 });
    const spec = { signal: "approval", key: "same-body", callback_url: `${receiver.url}?q=1`, timeout_s: 3600, metadata: { customer: "c-1", region: "eu" } };
    const wait = (await openWait(app, "hand-off-same", spec, 201)).body;
    const { answers, callbackJobs: jobs } = await acceptSignalsHandingOff(app.deps.db, [signalItem("hand-off-same", payload)], 30);
    expect(answers).toMatchObject([{ outcome: "received", waitId: wait.id }]);
    expect(jobs).toMatchObject([{ waitIds: [wait.id] }]);
    const handedOff = owedCallback(waitWithEventFromJson(jobs[0]!.read![0] as WaitWithEventJson));
    const readBack = owedCallback((await findWaitWithEvent(app.deps.db, wait.id))!);
    expect(handedOff).toBeDefined();
    expect(handedOff).toEqual(readBack);
    expect(JSON.parse(handedOff!.body)).toMatchObject({ type: "signal.received", wait: { key: "same-body", metadata: spec.metadata, result: { sequence: 1 } } });
    await app.database.sql`select signalbox.complete_handed_off(${[Number(jobs[0]!.id)]}::bigint[])`; // nobody here runs it
  });

  it("is run by a worker when its job comes due, should the process that took the signal never run it", async () => {
    const wait = (await openWait(app, "hand-off-2", { signal: "approval", callback_url: receiver.url }, 201)).body;
    const before = receiver.received.length;
    // What intake sends, with the hand-off asked for and nobody taking the jobs it returns.
    const rows = await app.database.sql`select * from signalbox.accept_signals(${JSON.stringify([intakeItem("hand-off-2")])}::json, 30)`;
    const handedOff = rows.filter((r) => r.answer === "callback_job");
    expect(rows.filter((r) => r.answer === "received")).toHaveLength(1);
    expect(handedOff.map((r) => [r.item, r.answer_wait_id])).toEqual([[null, wait.id]]);
    const [job] = await callbackJobs(app.database.sql);
    expect(job).toMatchObject({ id: String(handedOff[0]!.answer_job), payload: [{ id: wait.id, attempts: 0, round: 0 }] });
    expect(job!.due_in_s).toBeGreaterThan(25);

    await new Promise((r) => setTimeout(r, 500));
    expect(receiver.received.length).toBe(before); // not due: no worker takes it
    await advanceClock(app, 30);
    const callbacks = await receiver.waitFor(before + 1);
    expect(callbacks.at(-1)!.json.wait.id).toBe(wait.id);
    await waitFor("the job completed", () => callbackJobs(app.database.sql), { until: (jobs) => jobs.length === 0 });
  });
});

describe("signalbox.record_delivery_attempts with jobs to complete", () => {
  it("completes them in the record's transaction, unless a worker has locked one meanwhile", async () => {
    const app = await startTestApp({ worker: false });
    closers.push(() => app.close());
    await declareType(app, "approval");
    const sql = app.database.sql;
    const jobsFor = async (run: string, lockedBy?: string) => {
      const wait = (await openWait(app, run, { signal: "approval", callback_url: "http://engine.invalid/resume" }, 201)).body;
      const [job] = (await sql`select * from signalbox.accept_signals(${JSON.stringify([intakeItem(run)])}::json, 30)`).filter((r) => r.answer === "callback_job");
      if (lockedBy) await sql`update graphile_worker._private_jobs set locked_at = now(), locked_by = ${lockedBy} where id = ${job!.answer_job}`;
      return { waitId: wait.id as string, jobId: String(job!.answer_job) };
    };
    const record = (q: postgres.Sql | postgres.TransactionSql, waitId: string, jobIds: string[]) =>
      q`select n, outcome from signalbox.record_delivery_attempts(${JSON.stringify([deliveredAttempt(waitId)])}::json, 5, 1, ${jobIds}::bigint[])`;
    const exists = async (id: string) => (await sql`select 1 from graphile_worker._private_jobs where id = ${id}`).length === 1;

    // A database no worker has run on yet has no deliver_callback task: the callbacks' jobs go
    // through add_jobs, due now, and none is handed off.
    await openWait(app, "complete-fresh", { signal: "approval", callback_url: "http://engine.invalid/resume" }, 201);
    const answers = await sql`select * from signalbox.accept_signals(${JSON.stringify([intakeItem("complete-fresh")])}::json, 30)`;
    expect(answers.map((r) => r.answer)).toEqual(["received"]);
    expect((await callbackJobs(sql)).map((j) => j.due_in_s < 1)).toEqual([true]);
    await sql`delete from graphile_worker._private_jobs`;

    const rolledBack = await jobsFor("complete-rolled-back");
    await sql.begin(async (tx) => {
      await record(tx, rolledBack.waitId, [rolledBack.jobId]);
      await tx`select 1/0`;
    }).catch(() => {});
    expect(await exists(rolledBack.jobId)).toBe(true);

    const done = await jobsFor("complete-done");
    expect((await record(sql, done.waitId, [done.jobId])).map((r) => r.outcome)).toEqual(["delivered"]);
    expect(await exists(done.jobId)).toBe(false);

    const taken = await jobsFor("complete-taken", "a-worker");
    await record(sql, taken.waitId, [taken.jobId]);
    expect(await exists(taken.jobId)).toBe(true);
  });
});

describe("SIGKILL while a handed-off callback is in flight", () => {
  it("the callback is sent again, with the same webhook-id, once its job comes due after the restart", async () => {
    const db = await createTestDatabase();
    const sql = postgres(db.url, { max: 1, onnotice: () => {} });
    closers.push(() => db.drop(), () => sql.end());
    // The first request is held: the process is killed while it waits for the answer.
    let release!: () => void;
    const held = new Promise<number>((resolve) => (release = () => resolve(204)));
    const receiver = await startCallbackReceiver((n) => (n === 1 ? held : 204));
    closers.push(() => receiver.close(), async () => release());

    const first = await startService(onDatabase(db.url));
    expect((await first.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);
    const wait = (await openWait(first, "killed-hand-off", { signal: "approval", callback_url: receiver.url }, 201)).body;
    const sent = await fetch(`${first.baseUrl}/signals/killed-hand-off/approval`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(sent.status).toBe(202);
    const [inFlight] = await receiver.waitFor(1);
    first.child.kill("SIGKILL");
    expect(await first.exited).toBe("SIGKILL");

    // The job the hand-off left in the intake transaction is still there, not due yet.
    const [job] = await callbackJobs(sql);
    expect(job).toMatchObject({ payload: [{ id: wait.id, attempts: 0, round: 0 }] });
    expect(job!.due_in_s).toBeGreaterThan(0);

    const second = await startService(onDatabase(db.url));
    await advanceClock(sql, 10);
    const callbacks = await receiver.waitFor(2, 15_000);
    expect(callbacks[1]!.json.wait.id).toBe(wait.id);
    expect(callbacks[1]!.headers["webhook-id"]).toBe(inFlight!.headers["webhook-id"]);
    await waitFor("the job completed", () => callbackJobs(sql), { until: (jobs) => jobs.length === 0 });
    second.child.kill("SIGTERM");
    await second.exited;
  });
});

describe("a handed-off callback whose record is cut off", () => {
  // The record completes the handed-off job in its own transaction, the job first: while the
  // record waits (here for a row another session holds), the job is locked, and no worker takes
  // it. Once that transaction is gone (its backend killed), the job is due again in time.
  it("is sent again by the worker that runs its job, with the same webhook-id, and its attempt is recorded once", async () => {
    const { receiver, answer } = await holdingReceiver((n) => n === 1);
    const { idle, batcher } = await handingOffApp();
    const wait = (await openWait(idle, "cut-record", { signal: "approval", callback_url: receiver.url }, 201)).body;
    expect(await batcher.accept(signalItem("cut-record"))).toMatchObject({ outcome: "received", waitId: wait.id });
    const [first] = await receiver.waitFor(1);

    // Another session holds the wait's row: the record, once the answer comes, waits for it.
    const locker = postgres(idle.databaseUrl, { max: 1, onnotice: () => {} });
    closers.push(() => locker.end());
    let unlock!: () => void;
    const unlocked = new Promise<void>((resolve) => (unlock = resolve));
    let rowHeld!: () => void;
    const holdingRow = new Promise<void>((resolve) => (rowHeld = resolve));
    const holding = locker.begin(async (tx) => {
      await tx`select 1 from signalbox.waits where id = ${wait.id} for update`;
      rowHeld();
      await unlocked;
    });
    await holdingRow;
    answer();
    const recordWaiting = () =>
      idle.database.sql<{ pid: number }[]>`
        select pid from pg_stat_activity
        where wait_event_type = 'Lock' and query like '%record_delivery_attempts(%' and pid <> pg_backend_pid()`;
    const [stalled] = await waitFor("the record waiting for the row", recordWaiting, { until: (rows) => rows.length > 0 });
    const [job] = await callbackJobs(idle.database.sql);
    expect(job).toMatchObject({ payload: [{ id: wait.id, attempts: 0, round: 0 }] });
    const [locked] = await idle.database.sql<{ n: number }[]>`
      select count(*)::int as n from graphile_worker._private_jobs where id = ${job!.id}::bigint and ctid in (select ctid from graphile_worker._private_jobs for update skip locked)`;
    expect(locked!.n).toBe(0); // the record's transaction holds it: no worker can take it meanwhile

    // Its backend killed: the record rolls back, the job with it, and the engine records the attempt alone (waiting again).
    await idle.database.sql`select pg_terminate_backend(${stalled!.pid})`;
    await waitFor("the attempt recorded alone, waiting again", recordWaiting, { until: (rows) => rows.some((r) => r.pid !== stalled!.pid) });
    await advanceClock(idle, 11);
    const worker = runDueJobs(idle); // a worker with an engine of its own, as another process's
    const callbacks = await receiver.waitFor(2);
    expect(callbacks[1]!.json.wait.id).toBe(wait.id);
    expect(callbacks[1]!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);
    unlock();
    await holding;
    await worker;

    await waitFor("the attempt recorded", () => idle.database.sql<{ delivery_status: string }[]>`select delivery_status from signalbox.waits where id = ${wait.id}`, {
      until: ([w]) => w?.delivery_status === "delivered",
    });
    const [recorded] = await idle.database.sql<{ n: number; attempts: number }[]>`
      select count(*)::int as n, max(w.delivery_attempts)::int as attempts from signalbox.delivery_attempts a join signalbox.waits w on w.id = a.wait_id where a.wait_id = ${wait.id}`;
    expect(recorded).toEqual({ n: 1, attempts: 1 });
    expect(await callbackJobs(idle.database.sql)).toEqual([]);
  });
});
