import postgres from "postgres";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { body, intake, openWait } from "../helpers/http.ts";
import { drainJobs, holdAt, lockWaiters, releaseAllGates, resolutionEvents, settledWait } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";
import type { Metrics } from "../../src/core/metrics.ts";
import { IntakeBatcher, type BatchItem } from "../../src/signals/intake-batcher.ts";

// Group commit at intake (src/signals/intake-batcher.ts, signalbox.accept_signals): signals that
// arrive while earlier batches are in flight are committed together, yet each is answered as if
// it had been alone, one bad signal does not fail its neighbours, two batches never deadlock,
// and a batch holding a run's lock wins against that run's timeout exactly as a lone signal does.

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
let sql: postgres.Sql;
beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver();
  sql = postgres(app.databaseUrl, { max: 4, onnotice: () => {} });
  for (const [name, ttl] of [["approval", 0], ["buffered", 60]] as const) {
    const res = await app.api(`/signal-types/${name}`, { method: "PUT", json: { auth: { scheme: "none" }, buffer_ttl_s: ttl } });
    expect(res.status).toBe(201);
  }
});
afterEach(() => releaseAllGates());

// Signals that have reached the batcher (counted on the real one, which runs in this process): a
// test waits for its signals to be queued there before it frees the slots, instead of sleeping.
let atBatcher = 0;
const accept = IntakeBatcher.prototype.accept;
beforeAll(() => {
  IntakeBatcher.prototype.accept = function (this: IntakeBatcher, item) {
    atBatcher++;
    return accept.call(this, item);
  };
});
afterAll(() => {
  IntakeBatcher.prototype.accept = accept;
});
const queuedAtBatcher = (n: number, since: number) =>
  waitFor(`${n} signals at the intake batcher`, () => atBatcher - since, { until: (arrived) => arrived >= n });

afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await app?.close();
  await engine?.close();
});

/** Holds run `runId`'s row lock in a transaction of the test's own until `release()`. */
async function holdRunLock(runId: string) {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const done = sql.begin(async (tx) => {
    await tx`insert into signalbox.runs (run_id) values (${runId}) on conflict (run_id) do update set run_id = excluded.run_id`;
    locked();
    await released;
  });
  await isLocked;
  return { release: async () => (release(), await done) };
}

/**
 * Fills the batcher's four slots with one signal each for `runId`, whose lock the test holds: the
 * first goes at once, each next one beside the stuck ones once it has waited the stall time.
 */
async function fillSlotsBehindLock(runId: string) {
  const blocked = [];
  for (let k = 1; k <= 4; k++) {
    blocked.push(intake(app, runId, "approval", "{}"));
    await lockWaiters(sql, k);
  }
  return blocked;
}

async function batchMetrics(): Promise<{ count: number; sum: number }> {
  const text = await (await fetch(`${app.baseUrl}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
  return { count: read("signalbox_intake_batch_size_count"), sum: read("signalbox_intake_batch_size_sum") };
}

describe("signals arriving together", () => {
  it("are committed in one batch while the slots are busy, each answered as if alone", async () => {
    // Four signals for a locked run fill the four slots; 24 more for other runs queue meanwhile.
    const waits = new Map<string, string>();
    for (let i = 0; i < 24; i++) waits.set(`gc-${i}`, (await openWait(app, `gc-${i}`, { signal: "approval" })).body.id);
    const blockerWait = (await openWait(app, "gc-blocked", { signal: "approval" })).body.id;
    const lock = await holdRunLock("gc-blocked");
    const before = await batchMetrics();
    const arrivedBefore = atBatcher;

    const blocked = await fillSlotsBehindLock("gc-blocked"); // all four slots wait on the lock
    const queued = [...waits.keys()].map((run) => intake(app, run, "approval", JSON.stringify({ run })));
    await queuedAtBatcher(4 + 24, arrivedBefore); // the 24 requests reach the batcher and queue
    await lock.release();

    const answers = await Promise.all(queued);
    answers.forEach((a, i) => {
      expect(a.status).toBe(202);
      expect(a.body).toMatchObject({ outcome: "received", sequence: 1, wait_id: waits.get(`gc-${i}`) });
    });
    const blockedAnswers = (await Promise.all(blocked)).map((a) => a.body!);
    expect(blockedAnswers.filter((a) => a.outcome === "received")).toHaveLength(1);
    expect(blockedAnswers.filter((a) => a.outcome === "rejected_not_waiting")).toHaveLength(3);
    expect((await settledWait(app, blockerWait, 0)).status).toBe("received");

    const after = await batchMetrics();
    expect(after.sum - before.sum).toBe(28);
    // 4 batches of one (the locked run), then the 24 that queued together (at most 64 a batch).
    expect(after.count - before.count).toBe(5);
  });

  /** A batcher of the test's own (the app's database), recording the size of each batch it commits. */
  function ownBatcher(stallMs: number) {
    const sizes: number[] = [];
    const metrics = { intakeBatchSize: { observe: (n: number) => sizes.push(n) } } as unknown as Metrics;
    return { batcher: new IntakeBatcher(app.deps.db, { slots: 4, stallMs, metrics }), sizes };
  }
  const itemFor = (runId: string): BatchItem => ({
    id: `sg_own_${runId}`, runId, signal: "approval", payload: "{}", payloadHash: null, idempotencyKey: null, bufferTtlS: 0,
  });

  /**
   * A batcher of the test's own with one batch in flight, stuck on the lock of run
   * `<prefix>-blocked` that the test holds; `others` more runs have a wait open.
   */
  async function batchStuckBehindLock(prefix: string, others: number, stallMs: number) {
    const runs = Array.from({ length: others }, (_, i) => `${prefix}-${i}`);
    for (const run of [...runs, `${prefix}-blocked`]) await openWait(app, run, { signal: "approval" });
    const lock = await holdRunLock(`${prefix}-blocked`);
    const { batcher, sizes } = ownBatcher(stallMs);
    const first = batcher.accept(itemFor(`${prefix}-blocked`));
    await lockWaiters(sql, 1);
    return { runs, lock, batcher, sizes, first };
  }

  it("one batch in flight at a time: signals arriving meanwhile wait for it, then go as one batch", async () => {
    const { runs, lock, batcher, sizes, first } = await batchStuckBehindLock("one", 6, 60_000);
    const queued = runs.map((run) => batcher.accept(itemFor(run)));
    await lock.release();

    expect((await first).outcome).toBe("received");
    expect((await Promise.all(queued)).map((a) => a.outcome)).toEqual(Array(6).fill("received"));
    // Had they gone beside the stuck batch, they would have committed first, and not as one.
    expect(sizes).toEqual([1, 6]);
  });

  it("signals queued behind a stuck batch go beside it once they have waited the stall time", async () => {
    const { runs, lock, batcher, sizes, first } = await batchStuckBehindLock("stall", 3, 20);
    // Answered while the first batch still waits for the run's lock.
    expect((await Promise.all(runs.map((run) => batcher.accept(itemFor(run))))).map((a) => a.outcome)).toEqual(Array(3).fill("received"));
    expect(sizes).toEqual([3]);
    await lock.release();
    expect((await first).outcome).toBe("received");
    expect(sizes).toEqual([3, 1]);
  });

  it("large payloads go in smaller batches (about 4 MiB of payload a batch)", async () => {
    for (let i = 0; i < 6; i++) await openWait(app, `big-${i}`, { signal: "approval" });
    await openWait(app, "big-blocked", { signal: "approval" });
    const lock = await holdRunLock("big-blocked");
    const before = await batchMetrics();
    const arrivedBefore = atBatcher;
    const blocked = await fillSlotsBehindLock("big-blocked");
    // Six payloads of just under 1 MiB each: 4 fit under the cap, the last 2 go next.
    const big = (i: number) => JSON.stringify({ i, pad: "x".repeat(1024 * 1024 - 100) });
    const queued = Array.from({ length: 6 }, (_, i) => intake(app, `big-${i}`, "approval", big(i)));
    await queuedAtBatcher(4 + 6, arrivedBefore);
    await lock.release();

    expect((await Promise.all(queued)).map((a) => a.status)).toEqual([202, 202, 202, 202, 202, 202]);
    await Promise.all(blocked);
    const after = await batchMetrics();
    expect(after.sum - before.sum).toBe(10);
    expect(after.count - before.count).toBe(4 + 2); // 4 batches of one (the locked run), then 2 (of 4 and 2 large ones)
  });

  it("one signal that fails in Postgres fails alone: its batch neighbours are retried one by one and succeed", async () => {
    await sql.unsafe(`
      create function signalbox.test_boom() returns trigger language plpgsql as $$
      begin
        if new.payload like '%boom%' then raise exception 'boom'; end if;
        return new;
      end $$;
      create trigger test_boom before insert on signalbox.signals for each row execute function signalbox.test_boom();`);
    try {
      for (let i = 0; i < 6; i++) await openWait(app, `iso-${i}`, { signal: "approval" });
      await openWait(app, "iso-blocked", { signal: "approval" });
      const lock = await holdRunLock("iso-blocked");
      const arrivedBefore = atBatcher;
      const blocked = await fillSlotsBehindLock("iso-blocked");
      const queued = Array.from({ length: 6 }, (_, i) => intake(app, `iso-${i}`, "approval", JSON.stringify({ v: i === 3 ? "boom" : "fine" })));
      await queuedAtBatcher(4 + 6, arrivedBefore);
      await lock.release();

      const statuses = await Promise.all(queued.map(async (p) => (await p).status));
      expect(statuses).toEqual([202, 202, 202, 500, 202, 202]);
      await Promise.all(blocked);
      // The failed one changed nothing: its wait is still open, and the log has no trace of it.
      const log = await body(app.api("/runs/iso-3/signals"));
      expect(log.items).toEqual([]);
      expect((await body(app.api("/runs/iso-3/waits"))).items.map((w: { status: string }) => w.status)).toEqual(["waiting"]);
    } finally {
      await sql.unsafe(`drop trigger test_boom on signalbox.signals; drop function signalbox.test_boom();`);
    }
  });
});

describe("signalbox.accept_signals", () => {
  const item = (i: number, run: string, signal = "buffered") => ({
    i,
    id: `sg_test_${run}_${Math.random().toString(36).slice(2)}`,
    run_id: run,
    signal,
    payload: "{}",
    payload_hash: null,
    idempotency_key: null,
    buffer_ttl_s: 60,
  });

  it("takes its runs in run_id order: two batches naming the same runs in opposite orders never deadlock", async () => {
    const runs = Array.from({ length: 8 }, (_, i) => `dl-${i}`);
    const rounds = 40;
    const send = (order: string[]) => sql`select * from signalbox.accept_signals(${sql.json(order.map((run, i) => item(i, run)))}::json)`;
    const results = await Promise.all(Array.from({ length: rounds }, (_, k) => send(k % 2 === 0 ? runs : [...runs].reverse())));
    for (const rows of results) expect(rows.map((r) => r.answer)).toEqual(Array(8).fill("buffered"));
    // Every run numbered its 40 buffered signals 1..40 with no gap.
    const [row] = await sql<{ bad: number }[]>`
      select count(*)::int as bad from signalbox.runs where run_id like 'dl-%' and last_sequence <> ${rounds}`;
    expect(row!.bad).toBe(0);
  });

  it("answers each item in the order given, whatever order it took the runs in", async () => {
    const order = ["ord-c", "ord-a", "ord-b", "ord-a"];
    const rows = await sql`select * from signalbox.accept_signals(${sql.json(order.map((run, i) => item(i, run)))}::json) order by item`;
    expect(rows.map((r) => [r.item, r.answer, Number(r.answer_sequence)])).toEqual([
      [0, "buffered", 1],
      [1, "buffered", 1],
      [2, "buffered", 1],
      [3, "buffered", 2],
    ]);
  });

  it("draws each item's sequence with the run's lock and gives back those it does not accept: gapless, none taken by a rejection", async () => {
    const lastSequence = async (run: string) => Number((await sql`select last_sequence from signalbox.runs where run_id = ${run}`)[0]!.last_sequence);
    const keyed = (i: number, run: string, key: string, payload = "{}") => ({ ...item(i, run), idempotency_key: key, payload, payload_hash: payload });
    const batch = [
      item(0, "gap-a", "approval"), // rejected_not_waiting: buffer_ttl_s 0, no wait
      keyed(1, "gap-a", "k1"),
      keyed(2, "gap-a", "k1"), // duplicate
      keyed(3, "gap-a", "k1", "{\"other\":1}"), // rejected_idempotency_conflict
      item(4, "gap-a"),
    ].map((x) => (x.signal === "approval" ? { ...x, buffer_ttl_s: 0 } : x));
    const rows = await sql`select * from signalbox.accept_signals(${sql.json(batch)}::json) order by item`;
    expect(rows.map((r) => [r.answer, r.answer_sequence === null ? null : Number(r.answer_sequence)])).toEqual([
      ["rejected_not_waiting", null],
      ["buffered", 1],
      ["duplicate", 1],
      ["rejected_idempotency_conflict", null],
      ["buffered", 2],
    ]);
    expect(await lastSequence("gap-a")).toBe(2);

    // A cancelled run takes nothing; a continued one sends the signal on and keeps its own number.
    await sql`insert into signalbox.runs (run_id, status, cancelled_at) values ('gap-cancelled', 'cancelled', now())`;
    await sql`select * from signalbox.continue_run('gap-a', 'gap-b', 'test', 'test')`;
    const moved = await sql`select * from signalbox.accept_signals(${sql.json([item(0, "gap-cancelled"), item(1, "gap-a")])}::json) order by item`;
    expect(moved.map((r) => [r.answer, r.answer_run_id])).toEqual([
      ["rejected_not_active", "gap-cancelled"],
      ["buffered", "gap-b"],
    ]);
    expect([await lastSequence("gap-cancelled"), await lastSequence("gap-a")]).toEqual([0, 2]);
    expect(Number(moved[1]!.answer_sequence)).toBe(await lastSequence("gap-b"));
  });

  it("a batch holding the run's lock when the timeout job runs wins: the timeout waits for it, then changes nothing", async () => {
    const timeout = holdAt("expire-wait:read");
    const waitId = (await openWait(app, "lock-race", { signal: "approval", timeout_s: 30, callback_url: engine.url })).body.id;
    await advanceClock(app, 30);
    expect(await timeout.reached).toBe(waitId); // past the deadline, the timeout job has started and is held

    let commit!: () => void;
    const committed = new Promise<void>((r) => (commit = r));
    let answered!: (rows: postgres.RowList<postgres.Row[]>) => void;
    const answer = new Promise<postgres.RowList<postgres.Row[]>>((r) => (answered = r));
    const tx = sql.begin(async (t) => {
      answered(await t`select * from signalbox.accept_signals(${sql.json([item(0, "lock-race", "approval")])}::json)`);
      await committed; // the run's lock is held until this transaction ends
    });
    const [row] = await answer;
    expect(row).toMatchObject({ answer: "received", answer_wait_id: waitId });
    timeout.release();
    await lockWaiters(sql); // the timeout job blocks on the run lock the batch holds
    commit();
    await tx;

    await drainJobs(app);
    const wait = await settledWait(app, waitId);
    expect(wait.status).toBe("received");
    expect((await resolutionEvents(app, "lock-race")).map((e) => e.type)).toEqual(["signal.received"]);
    const callbacks = engine.received.filter((cb) => cb.json.wait.id === waitId);
    expect(callbacks.map((cb) => cb.json.type)).toEqual(["signal.received"]);
  });
});
