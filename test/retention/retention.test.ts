import { sql, type SQL } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Queryable } from "../../src/db/client.ts";
import { PURGE_LOCK, purgeOldRecords } from "../../src/retention/purge-old-records.ts";
import {
  markExpiredSignals,
  purgeEventsWithoutWait,
  purgeOldNotifications,
  purgeResolvedWaits,
  purgeSignalsWithoutWait,
  ROW_BATCH,
  WAIT_BATCH,
} from "../../src/retention/retention.queries.ts";
import { schedulePurge } from "../../src/retention/schedule-purge.ts";
import { body, declareType, intake, openWait, readAll } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// SIGNALBOX_RETENTION_DAYS (30 here): resolved waits with their history and deliveries, signal
// records and notifications older than that are purged in small batches; open waits, pending
// deliveries, buffered signals within their TTL and anything recent stay. Time is driven by
// moving rows' timestamps back, never by sleeping. No job worker here: the purge is called as
// the job calls it (the job itself is tested at the end), and callbacks stay pending.

const DAYS = 30;
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false, env: { SIGNALBOX_RETENTION_DAYS: String(DAYS) } });
  await declareType(app, "approval", { auth: { scheme: "none" } });
  await declareType(app, "payment", { auth: { scheme: "none" } });
  await declareType(app, "held", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
  // notify_url: waits of this type have notification rows, and open through the TypeScript path.
  await declareType(app, "noted", { auth: { scheme: "none" }, buffer_ttl_s: 600, notify_url: "http://127.0.0.1:9/notify" });
});
afterAll(async () => {
  await app?.close();
});

const db = () => app.database.sql;
const purge = (days = DAYS) => purgeOldRecords({ ...app.deps, config: { ...app.config, SIGNALBOX_RETENTION_DAYS: days } }, { budgetMs: 60_000 });

/** Moves everything of a run `days` into the past (as if it happened then). */
async function age(run: string, days = DAYS + 10) {
  const back = `${days} days`;
  await db()`update signalbox.waits set created_at = created_at - ${back}::interval, resolved_at = resolved_at - ${back}::interval where run_id = ${run}`;
  await db()`update signalbox.events set occurred_at = occurred_at - ${back}::interval where run_id = ${run}`;
  await db()`update signalbox.signals set received_at = received_at - ${back}::interval, buffer_expires_at = buffer_expires_at - ${back}::interval where run_id = ${run}`;
  await db()`update signalbox.notifications set created_at = created_at - ${back}::interval where wait_id in (select id from signalbox.waits where run_id = ${run})`;
}

/** How many rows of a run each table holds. */
async function rowsOf(run: string) {
  const [r] = await db()<Array<{ waits: number; events: number; signals: number; notifications: number; votes: number; link_uses: number; runs: number }>>`
    select (select count(*)::int from signalbox.waits where run_id = ${run}) as waits,
           (select count(*)::int from signalbox.events where run_id = ${run}) as events,
           (select count(*)::int from signalbox.signals where run_id = ${run}) as signals,
           (select count(*)::int from signalbox.notifications n join signalbox.waits w on w.id = n.wait_id where w.run_id = ${run}) as notifications,
           (select count(*)::int from signalbox.votes v join signalbox.waits w on w.id = v.wait_id where w.run_id = ${run}) as votes,
           (select count(*)::int from signalbox.link_uses l join signalbox.waits w on w.id = l.wait_id where w.run_id = ${run}) as link_uses,
           (select count(*)::int from signalbox.runs where run_id = ${run}) as runs`;
  return r!;
}

const received = async (run: string, signal: string, payload = "{}") => {
  const r = await intake(app, run, signal, payload);
  expect(r.status, r.text).toBe(202);
  return r.body as { outcome: string; signal_id: string; sequence: number; wait_id: string | null };
};

interface SignalRecord {
  id: string;
  outcome: string;
  sequence: number | null;
  wait_id: string | null;
}
const signalLog = async (run: string) => (await readAll<SignalRecord>(app, `/runs/${run}/signals`, 500)).items;

describe("what is purged", () => {
  it("an old resolved wait goes with its events, signals, notifications, votes and link uses; the run and its sequence stay", async () => {
    const run = "old-1";
    const w1 = (await openWait(app, run, { signal: "approval", key: "step-1" })).body;
    await received(run, "approval", '{"n":1}');
    const w2 = (await openWait(app, run, { signal: "noted", timeout_s: 3600 })).body; // notifications: signal.waiting and none else
    await received(run, "noted", '{"n":2}');
    const w3 = (await openWait(app, run, { signal: "payment", timeout_at: "2020-01-01T00:00:00Z" })).body; // timed out at once
    const w4 = (await openWait(app, run, { signal: "payment" })).body;
    expect((await app.api(`/waits/${w4.id}/cancel`, { method: "POST" })).status).toBe(200);
    await intake(app, run, "approval", "{}"); // rejected_not_waiting: in the signal log, no wait
    expect((await app.api(`/runs/${run}/pause`, { method: "POST", json: { reason: "r" } })).status).toBe(200); // an event with no wait
    // A quorum vote and a used approval link of the first wait.
    await db()`insert into signalbox.votes (wait_id, responder, response, signal_id) values (${w1.id}, 'kim', 'approve', 'sg_x')`;
    await db()`insert into signalbox.link_uses (link_id, wait_id) values ('lk_old_1', ${w1.id})`;
    await age(run);
    const before = await rowsOf(run);
    expect(before.waits).toBe(4);
    expect(before.notifications).toBeGreaterThan(0);

    const report = await purge();
    expect(report.more).toBe(false);
    const [left] = await db()`
      select (select count(*)::int from signalbox.waits where run_id = ${run}) as waits,
             (select count(*)::int from signalbox.events where run_id = ${run}) as events,
             (select count(*)::int from signalbox.signals where run_id = ${run}) as signals,
             (select count(*)::int from signalbox.notifications where wait_id = any(${[w1.id, w2.id, w3.id, w4.id]})) as notifications,
             (select count(*)::int from signalbox.votes where wait_id = ${w1.id}) as votes,
             (select count(*)::int from signalbox.link_uses where wait_id = ${w1.id}) as link_uses`;
    expect(left).toEqual({ waits: 0, events: 0, signals: 0, notifications: 0, votes: 0, link_uses: 0 });
    for (const w of [w1, w2, w3, w4]) expect((await app.api(`/waits/${w.id}`)).status).toBe(404);
    expect(await signalLog(run)).toEqual([]);
    expect((await body(app.api(`/runs/${run}/events`))).items).toEqual([]);

    // The run stays, with its state and its gapless sequence: the next accepted signal is the third.
    expect(await body(app.api(`/runs/${run}`))).toMatchObject({ run_id: run, control: { is_paused: true } });
    await openWait(app, run, { signal: "approval" });
    expect((await received(run, "approval")).sequence).toBe(3);
  });

  it("keeps open waits, pending deliveries, buffered signals within their TTL and everything recent", async () => {
    const run = "keep-1";
    const open = (await openWait(app, run, { signal: "approval" })).body; // open for 40 days
    const pending = (await openWait(app, run, { signal: "payment", callback_url: "http://127.0.0.1:9/engine" })).body;
    await received(run, "payment"); // resolved; no worker: its callback stays pending
    const held = await received(run, "held"); // buffered, its TTL moved past the period below
    await age(run);
    await db()`update signalbox.signals set buffer_expires_at = now() + interval '1 day' where id = ${held.signal_id}`;
    // Recent: a resolved wait, a rejection, a run event.
    const recent = "keep-2";
    const fresh = (await openWait(app, recent, { signal: "approval" })).body;
    await received(recent, "approval");
    await intake(app, recent, "payment", "{}"); // rejected_not_waiting
    await app.api(`/runs/${recent}/pause`, { method: "POST", json: {} });
    const before = [await rowsOf(run), await rowsOf(recent)];

    await purge();
    expect([await rowsOf(run), await rowsOf(recent)]).toEqual(before);
    expect(await body(app.api(`/waits/${open.id}`))).toMatchObject({ status: "waiting" });
    expect(await body(app.api(`/waits/${pending.id}`))).toMatchObject({ status: "received", delivery: { status: "pending" } });
    expect(await body(app.api(`/waits/${fresh.id}`))).toMatchObject({ status: "received" });
    // The buffered signal, 40 days old but within its TTL, is still there to be taken.
    const taker = (await openWait(app, run, { signal: "held" })).body;
    expect(taker).toMatchObject({ status: "received", result: { signal_id: held.signal_id } });

    // Once the callback is no longer pending, the old resolved wait goes.
    await db()`update signalbox.waits set delivery_status = 'delivered' where id = ${pending.id}`;
    await purge();
    expect((await app.api(`/waits/${pending.id}`)).status).toBe(404);
    expect((await app.api(`/waits/${open.id}`)).status).toBe(200);
  });

  it("keeps a composite wait and its members together while one of them must stay", async () => {
    const run = "comp-1";
    const parent = (await openWait(app, run, { signal: "both", all: [{ signal: "approval" }, { signal: "payment" }] })).body;
    await received(run, "approval");
    await received(run, "payment");
    expect(await body(app.api(`/waits/${parent.id}`))).toMatchObject({ status: "received" });
    await age(run);
    // A delivery needs a callback URL (waits_delivery_needs_callback): give the member one.
    await db()`update signalbox.waits set delivery_status = 'pending', callback_url = 'http://127.0.0.1:9/resume' where run_id = ${run} and parent_wait_id is not null and signal = 'payment'`;
    await purge();
    expect((await rowsOf(run)).waits).toBe(3);
    await db()`update signalbox.waits set delivery_status = 'failed', callback_url = 'http://127.0.0.1:9/resume' where run_id = ${run}`;
    await purge();
    expect((await rowsOf(run)).waits).toBe(0);
  });

  it("old notifications that are no longer pending go; pending ones stay", async () => {
    const w = (await openWait(app, "notes-1", { signal: "noted" })).body; // open: kept
    await db()`
      insert into signalbox.notifications (id, wait_id, type, url, status, created_at) values
        ('nt_old_delivered', ${w.id}, 'signal.waiting', 'http://x', 'delivered', now() - interval '40 days'),
        ('nt_old_pending', ${w.id}, 'signal.reminder', 'http://x', 'pending', now() - interval '40 days'),
        ('nt_new_delivered', ${w.id}, 'signal.reminder', 'http://x', 'delivered', now() - interval '1 day')`;
    await purge();
    const ids = (await db()`select id from signalbox.notifications where id in ('nt_old_delivered', 'nt_old_pending', 'nt_new_delivered')`).map((r) => r.id);
    expect(ids.sort()).toEqual(["nt_new_delivered", "nt_old_pending"]);
  });

  it("SIGNALBOX_RETENTION_DAYS=0 keeps everything", async () => {
    const run = "zero-1";
    await openWait(app, run, { signal: "approval" });
    await received(run, "approval");
    await intake(app, run, "payment", "{}");
    await app.api(`/runs/${run}/pause`, { method: "POST", json: {} });
    await age(run, 3650);
    const before = await rowsOf(run);
    const report = await purge(0);
    expect(await rowsOf(run)).toEqual(before);
    expect({ ...report.totals, expired: 0 }).toEqual({ waits: 0, events: 0, signals: 0, notifications: 0, votes: 0, deliveryAttempts: 0, linkUses: 0, looseSignals: 0, looseEvents: 0, expired: 0, runStarts: 0, rejectedOverCap: 0 });
  });
});

describe("how it is purged", () => {
  it("in many small batches, each one short transaction of a few hundred rows at most", async () => {
    // 450 resolved waits (each with two events and its signal) and 2,500 rejections, 40 days old.
    await db()`insert into signalbox.runs (run_id) select 'bulk-w-' || g from generate_series(1, 450) g`; // waits and events reference their run
    await db()`
      insert into signalbox.waits (id, run_id, signal, status, created_at, resolved_at, signal_id, resolution_event_id, callback_url, delivery_status)
      select 'wt_bulk_' || g, 'bulk-w-' || g, 'approval', 'received', now() - interval '41 days', now() - interval '40 days', 'sg_bulk_w' || g, g,
             'http://127.0.0.1:9/resume', 'delivered'
      from generate_series(1, 450) g`;
    await db()`
      insert into signalbox.signals (id, run_id, signal, sequence, outcome, payload, received_at, wait_id)
      select 'sg_bulk_w' || g, 'bulk-w-' || g, 'approval', 1, 'received', '{}', now() - interval '40 days', 'wt_bulk_' || g
      from generate_series(1, 450) g`;
    await db()`
      insert into signalbox.events (run_id, type, wait_id, occurred_at)
      select 'bulk-w-' || g, t, 'wt_bulk_' || g, now() - interval '40 days'
      from generate_series(1, 450) g, unnest(array['signal.waiting', 'signal.received']) t`;
    await db()`
      insert into signalbox.signals (id, run_id, signal, outcome, payload, received_at)
      select 'sg_bulk_r' || g, 'bulk-r', 'approval', 'rejected_not_waiting', '{}', now() - interval '40 days' + g * interval '1 ms'
      from generate_series(1, 2500) g`;

    const report = await purge();
    expect(report.totals.waits).toBeGreaterThanOrEqual(450);
    expect(report.totals.looseSignals).toBeGreaterThanOrEqual(2500);
    // 450 waits: 45 batches at least (10 each); 2,500 rejections: 50 at least (50 each).
    expect(WAIT_BATCH).toBeLessThanOrEqual(10);
    expect(ROW_BATCH).toBeLessThanOrEqual(50);
    expect(report.batches).toBeGreaterThanOrEqual(95);
    expect(report.largestBatch).toBeLessThanOrEqual(ROW_BATCH);
    const [left] = await db()`select count(*)::int as n from signalbox.signals where run_id like 'bulk-%'`;
    expect(left!.n).toBe(0);
  });

  it("a batch goes on from the newest row the one before took, not over what that one left behind", async () => {
    const base = Date.now() - (DAYS + 10) * 86_400_000;
    const old = (id: string, msAgo: number) =>
      db()`insert into signalbox.signals (id, run_id, signal, outcome, payload, received_at)
           values (${id}, 'cursor-1', 'approval', 'rejected_not_waiting', '{}', ${new Date(base - msAgo).toISOString()}::timestamptz)`;
    await old("sg_cur_1", 3);
    await old("sg_cur_2", 2);
    await old("sg_cur_3", 1);
    const first = await purgeSignalsWithoutWait(app.deps.db, DAYS, null, 2);
    expect(first.rows).toBe(2);
    await old("sg_cur_0", 4); // older than where the next batch starts: left for the next run
    const second = await purgeSignalsWithoutWait(app.deps.db, DAYS, first.last, 2);
    expect(second.rows).toBe(1);
    expect((await db()`select id from signalbox.signals where run_id = 'cursor-1'`).map((r) => r.id)).toEqual(["sg_cur_0"]);
    expect((await purgeSignalsWithoutWait(app.deps.db, DAYS, null, 2)).rows).toBe(1);
  });

  it("every statement reaches its rows through an index, never a scan of the whole table", async () => {
    const plans = new Map<string, string>();
    await app.deps.db.transaction(async (tx) => {
      await tx.execute(sql`set local enable_seqscan = off`);
      /** Runs EXPLAIN instead of the statement and keeps the plan. */
      const explaining = (name: string) =>
        ({
          execute: async (query: SQL) => {
            const rows = await tx.execute<{ "QUERY PLAN": string }>(sql`explain ${query}`);
            plans.set(name, rows.map((r) => r["QUERY PLAN"]).join("\n"));
            return [{}];
          },
        }) as unknown as Queryable;
      await purgeResolvedWaits(explaining("waits"), DAYS);
      await purgeEventsWithoutWait(explaining("events"), DAYS);
      await purgeSignalsWithoutWait(explaining("signals"), DAYS);
      await purgeOldNotifications(explaining("notifications"), DAYS);
      await markExpiredSignals(explaining("expired"));
    });
    if (process.env.SHOW_PLANS) for (const [name, plan] of plans) console.log(`${name}:\n${plan}`);
    for (const [name, plan] of plans) expect(plan, `${name}:\n${plan}`).not.toMatch(/Seq Scan/);
    const uses = (name: string, ...indexes: string[]) => {
      for (const index of indexes) expect(plans.get(name), `${name} should use ${index}:\n${plans.get(name)}`).toContain(index);
    };
    uses("waits", "waits_resolved", "events_wait", "signals_wait", "notifications_wait", "votes_wait_id_responder_pk", "link_uses_wait");
    uses("events", "events_without_wait_occurred");
    uses("signals", "signals_without_wait_received");
    uses("notifications", "notifications_created");
    uses("expired", "signals_buffer_expiry");
  });

  it("runs one at a time: while another session holds its lock, a run stands down", async () => {
    await db()`insert into signalbox.signals (id, run_id, signal, outcome, payload, received_at)
               values ('sg_lock_old', 'lock-2', 'approval', 'rejected_not_waiting', '{}', now() - interval '40 days')`;
    const gone = async () => (await db()`select 1 from signalbox.signals where id = 'sg_lock_old'`).length === 0;
    await db().begin(async (tx) => {
      await tx`select pg_advisory_xact_lock(hashtext(${PURGE_LOCK}))`;
      const report = await purge();
      expect(report).toMatchObject({ busy: true, more: true, batches: 0 });
      expect(await gone()).toBe(false);
    });
    expect(await purge()).toMatchObject({ busy: false });
    expect(await gone()).toBe(true);
  });

  it("skips a buffered signal a wait is taking (locked) rather than waiting for it", async () => {
    const held = await received("lock-1", "held");
    await db()`update signalbox.signals set buffer_expires_at = now() - interval '1 second' where id = ${held.signal_id}`;
    const outcome = async () => (await db()`select outcome from signalbox.signals where id = ${held.signal_id}`)[0]!.outcome;
    await db().begin(async (tx) => {
      await tx`select id from signalbox.signals where id = ${held.signal_id} for update`;
      await markExpiredSignals(app.deps.db); // would block here if it waited for the lock
      expect(await outcome()).toBe("buffered");
    });
    await markExpiredSignals(app.deps.db);
    expect(await outcome()).toBe("expired");
  });
});

describe("buffered signals past their TTL: expired", () => {
  for (const type of ["held", "noted"]) {
    it(`show as expired at once, are never taken by a new wait, and are marked by the job (${type === "held" ? "one-statement" : "TypeScript"} open path)`, async () => {
      const run = `exp-${type}`;
      const early = await received(run, type, '{"early":true}');
      expect(early).toMatchObject({ outcome: "buffered", sequence: 1 });
      await db()`update signalbox.signals set buffer_expires_at = now() - interval '1 second' where id = ${early.signal_id}`;

      // Before the job has run: every read says expired.
      expect(await signalLog(run)).toEqual([expect.objectContaining({ id: early.signal_id, outcome: "expired", sequence: 1, wait_id: null })]);
      const expiredIds = (await readAll<SignalRecord>(app, "/signals?outcome=expired", 500)).items.map((s) => s.id);
      expect(expiredIds).toContain(early.signal_id);
      const bufferedIds = (await readAll<SignalRecord>(app, "/signals?outcome=buffered", 500)).items.map((s) => s.id);
      expect(bufferedIds).not.toContain(early.signal_id);

      // A new wait does not take it.
      const wait = (await openWait(app, run, { signal: type })).body;
      expect(wait.status).toBe("waiting");

      // The job stores the outcome; the record keeps its sequence.
      await purge();
      const [row] = await db()`select outcome, sequence::int, wait_id from signalbox.signals where id = ${early.signal_id}`;
      expect(row).toEqual({ outcome: "expired", sequence: 1, wait_id: null });
      expect(await signalLog(run)).toEqual([expect.objectContaining({ id: early.signal_id, outcome: "expired", sequence: 1 })]);

      // The next signal resolves the open wait, with the next sequence.
      expect(await received(run, type, '{"late":true}')).toMatchObject({ outcome: "received", sequence: 2, wait_id: wait.id });
      expect(await body(app.api(`/waits/${wait.id}`))).toMatchObject({ status: "received", result: { sequence: 2, payload: { late: true } } });
    });
  }

  it("a buffered signal within its TTL still shows buffered", async () => {
    const held = await received("exp-fresh", "held");
    expect(await signalLog("exp-fresh")).toEqual([expect.objectContaining({ id: held.signal_id, outcome: "buffered" })]);
    expect((await readAll<SignalRecord>(app, "/signals?outcome=buffered", 500)).items.map((s) => s.id)).toContain(held.signal_id);
  });

  it("?outcome=expired is a valid filter (400 for an unknown one)", async () => {
    expect((await app.api("/signals?outcome=expired")).status).toBe(200);
    expect((await app.api("/signals?outcome=gone")).status).toBe(400);
  });
});

describe("the retention job", () => {
  it("is scheduled once for all processes, purges when it runs, and schedules its next run", async () => {
    const withWorker = await startTestApp({ env: { SIGNALBOX_RETENTION_DAYS: String(DAYS) } });
    try {
      const q = withWorker.database.sql;
      const job = async () =>
        (await q<Array<{ run_in_s: number; n: number }>>`
          select count(*)::int as n, extract(epoch from min(run_at) - now())::float8 as run_in_s
          from graphile_worker.jobs where task_identifier = 'purge_old_records' and locked_at is null`)[0]!;
      // The sweep (every second in tests) keeps one pending, under one key.
      const first = await waitFor("one pending purge job", job, { until: (j) => j.n === 1 });
      expect(first.run_in_s).toBeGreaterThan(60);

      await q`insert into signalbox.signals (id, run_id, signal, outcome, payload, received_at)
              values ('sg_job_old', 'job-1', 'approval', 'rejected_not_waiting', '{}', now() - interval '40 days')`;
      // Due now (as it will be PURGE_INTERVAL_S after the last run): it purges, then rests.
      await schedulePurge(withWorker.deps.db, 0, false);
      await waitFor("the purge to delete the 40-day-old signal", async () => (await q`select 1 from signalbox.signals where id = 'sg_job_old'`).length, { until: (n) => n === 0 });
      const next = await waitFor("the purge to set its next run over a minute off", job, { until: (j) => j.n === 1 && j.run_in_s > 60 });
      expect(next.run_in_s).toBeLessThanOrEqual(600);
    } finally {
      await withWorker.close();
    }
  });
});
