import type postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setDebugHook } from "../../src/core/debug-point.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { declareType, openWait } from "../helpers/http.ts";
import { resolutionEvents, settledWait } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// The deadline alarm (db/functions/deadline_alarm.sql): one job due at the earliest open
// deadline times out the waits whose deadline is a minute away or more; they get no job of
// their own. Nearer deadlines keep theirs (test/races/signal-vs-timeout.test.ts races those).

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;

beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver();
  await declareType(app, "approval", { auth: { scheme: "none" } });
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
});

const alarm = async () => {
  const [row] = await app.database.sql<{ run_at: string; locked: boolean }[]>`
    select run_at::text, locked_at is not null as locked from graphile_worker.jobs where key = 'expire_due'`;
  return row && { runAt: new Date(row.run_at), locked: row.locked };
};
const ownJobs = async (waitId: string) => {
  const [row] = await app.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where key = ${`expire:${waitId}`}`;
  return row!.n;
};
/** Arms the alarm, as its own run and the sweep do; the time it set. */
const arm = async () => (await app.database.sql<{ at: string }[]>`select signalbox.arm_deadline_alarm()::text as at`)[0]!.at;
/** A transaction that ran `statement` (its first row) and stays open, holding its locks, until `commit`. */
async function transactionLeftOpen<T>(statement: (tx: postgres.TransactionSql) => PromiseLike<T[]>): Promise<{ row: T | undefined; commit(): Promise<void> }> {
  let commit!: () => void;
  const committed = new Promise<void>((r) => (commit = r));
  let ran!: (row: T | undefined) => void;
  const first = new Promise<T | undefined>((r) => (ran = r));
  const done = app.database.sql.begin(async (tx) => {
    ran((await statement(tx))[0]);
    await committed;
  });
  const row = await Promise.race([first, done.then(() => undefined)]);
  return { row, commit: async () => (commit(), await done) };
}
const secondsFromNow = async (at: Date | string) => {
  const [row] = await app.database.sql<{ s: number }[]>`select extract(epoch from ${new Date(at).toISOString()}::timestamptz - now())::float8 as s`;
  return row!.s;
};

describe("the deadline alarm", () => {
  it("times out a wait an hour away with no job of its own, once, then arms itself for the next deadline", async () => {
    const first = (await openWait(app, "alarm-1", { signal: "approval", timeout_s: 3600, callback_url: engine.url }, 201)).body;
    const second = (await openWait(app, "alarm-2", { signal: "approval", timeout_s: 7200, callback_url: engine.url }, 201)).body;
    expect(await ownJobs(first.id)).toBe(0);
    expect(await ownJobs(second.id)).toBe(0);
    expect((await alarm())!.runAt.getTime()).toBeLessThanOrEqual(new Date(first.timeout_at).getTime());

    await advanceClock(app, 3600); // the first deadline is now, and so is the alarm
    const settled = await settledWait(app, first.id);
    expect(settled.status).toBe("timed_out");
    expect((await resolutionEvents(app, "alarm-1")).map((e) => e.type)).toEqual(["signal.timeout"]);
    await waitFor("the timeout's callback", async () => engine.received.filter((cb) => cb.json.wait.id === first.id), { until: (cbs) => cbs.length === 1 });

    // Armed again, no later than a minute ahead (the second deadline is an hour away).
    const next = await waitFor("the alarm armed again", alarm, { until: (a) => a !== undefined && !a.locked && a.runAt.getTime() > Date.now() });
    expect(await secondsFromNow(next!.runAt)).toBeLessThanOrEqual(60);
    expect((await settledWait(app, second.id, 0)).status).toBe("waiting");
  });

  it("gives a deadline within the minute a job of its own", async () => {
    const wait = (await openWait(app, "alarm-near", { signal: "approval", timeout_s: 30 }, 201)).body;
    expect(await ownJobs(wait.id)).toBe(1);
    await advanceClock(app, 30);
    expect((await settledWait(app, wait.id)).status).toBe("timed_out");
  });

  it("times out a wait whose own job keeps failing (backing off for seconds, then hours), once, and removes that job", async () => {
    const wait = (await openWait(app, "alarm-own-failing", { signal: "approval", timeout_s: 20, callback_url: engine.url }, 201)).body;
    expect(await ownJobs(wait.id)).toBe(1);
    let failures = 0;
    setDebugHook("expire-wait:read", (id) => {
      if (id !== wait.id) return;
      failures++;
      throw new Error("the database went away mid-job"); // graphile-worker fails the job: due again after its backoff
    });
    try {
      await advanceClock(app, 20);
      const settled = await settledWait(app, wait.id, 5);
      expect(settled.status).toBe("timed_out");
      expect(failures).toBeGreaterThanOrEqual(1); // its own job ran, failed, and the alarm took the wait
      await waitFor("the timeout's callback", async () => engine.received.filter((cb) => cb.json.wait.id === wait.id), { until: (cbs) => cbs.length === 1 });
      expect((await resolutionEvents(app, "alarm-own-failing")).map((e) => e.type)).toEqual(["signal.timeout"]);
      expect(await ownJobs(wait.id)).toBe(0);
    } finally {
      setDebugHook("expire-wait:read", undefined);
    }
  });

  it("while a wait relying on it has not committed, moves no later than a minute after that opener began, nor past the pending alarm", async () => {
    // A wait two hours away is open (from the first test), so a quiet alarm goes a minute ahead.
    expect(await secondsFromNow(await arm())).toBeGreaterThan(30);

    // The nearest deadline that may rely on the alarm: a minute after the opener's transaction began.
    const opener = await transactionLeftOpen<{ at: string }>(
      (tx) => tx`select (now() + interval '60 seconds')::text as at, signalbox.cover_deadline('wait_in_flight', now() + interval '60 seconds')`,
    );
    try {
      const deadline = new Date(opener.row!.at);
      // It may not move past a deadline it cannot see yet; nor, as it did, to a moment from now,
      // which kept it running ten times a second while waits were being opened.
      const busy = await arm();
      expect(new Date(busy).getTime()).toBeLessThan(deadline.getTime());
      expect(await secondsFromNow(busy)).toBeGreaterThan(30);
      // An opener may be relying on the pending alarm's time: not later than that either.
      await app.database.sql`update graphile_worker._private_jobs set run_at = now() + interval '10 seconds' where key = 'expire_due' and locked_at is null`;
      expect(await secondsFromNow(await arm())).toBeLessThanOrEqual(10);
    } finally {
      await opener.commit();
    }
    expect(await secondsFromNow(await arm())).toBeGreaterThan(30);
  });

  it("looks again a moment later when another arming holds its lock", async () => {
    const other = await transactionLeftOpen((tx) => tx`select pg_advisory_xact_lock(signalbox.deadline_alarm_lock())`);
    try {
      expect(await secondsFromNow(await arm())).toBeLessThanOrEqual(0.2);
    } finally {
      await other.commit();
    }
  });

  it("is armed again by the sweep when a worker took it and died (its row left locked), and the waits relying on it still time out once", async () => {
    const wait = (await openWait(app, "alarm-orphaned", { signal: "approval", timeout_s: 3600, callback_url: engine.url }, 201)).body;
    expect(await ownJobs(wait.id)).toBe(0);
    // A worker of no live process holds the alarm: nothing will run it or release it soon.
    await app.database.sql`
      update graphile_worker._private_jobs set locked_at = now(), locked_by = 'a-worker-that-died', attempts = attempts + 1 where key = 'expire_due'`;
    expect((await alarm())!.locked).toBe(true);
    // The sweep (every few seconds, on the wall clock) arms a new alarm beside the orphaned one.
    await waitFor("a new alarm beside the orphaned one", alarm, { until: (a) => a !== undefined && !a.locked, timeoutMs: 10_000 });

    await advanceClock(app, 3600);
    expect((await settledWait(app, wait.id)).status).toBe("timed_out");
    await waitFor("the timeout's callback", async () => engine.received.filter((cb) => cb.json.wait.id === wait.id), { until: (cbs) => cbs.length === 1 });
    expect((await resolutionEvents(app, "alarm-orphaned")).map((e) => e.type)).toEqual(["signal.timeout"]);
  });

  it("stays armed when a worker whose run of it was released as stale (it stalled) wakes and completes that run", async () => {
    const sql = app.database.sql;
    const alarmId = async () => (await sql<{ id: string }[]>`select id::text from graphile_worker._private_jobs where key = 'expire_due' and locked_at is null`)[0]?.id;
    const ran = await waitFor("a pending alarm", alarmId, { until: (id) => id !== undefined });
    // A worker takes the alarm and stalls past SIGNALBOX_WORKER_STALE_S: the sweep releases its
    // jobs and arms the alarm again; then the worker wakes and completes its run, by id, as
    // graphile-worker completes a job.
    await sql`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'a-stalled-worker', attempts = attempts + 1 where id = ${ran!}::bigint`;
    await sql`select graphile_worker.force_unlock_workers(array['a-stalled-worker'])`;
    await arm();
    await sql`delete from graphile_worker._private_jobs where id = ${ran!}::bigint`;
    expect(await alarm()).toMatchObject({ locked: false });
  });

  it("times out each of 100 waits relying on it once, opened while it runs", async () => {
    const opened = await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        if (i % 10 === 0) await advanceClock(app, 1); // the alarm runs and arms itself while others open
        return (await openWait(app, `alarm-many-${i}`, { signal: "approval", timeout_s: 60 + (i % 7) }, 201)).body as { id: string };
      }),
    );
    await advanceClock(app, 70);
    const settled = await Promise.all(opened.map((w) => settledWait(app, w.id)));
    expect(settled.filter((w) => w.status !== "timed_out")).toEqual([]);
    const [events] = await app.database.sql<{ n: number }[]>`
      select count(*)::int as n from signalbox.events where type = 'signal.timeout' and run_id like 'alarm-many-%'`;
    expect(events!.n).toBe(100);
  });
});
