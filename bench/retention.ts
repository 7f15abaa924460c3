/**
 * `npm run bench -- --retention`: does the retention job's purge of a million old rows move
 * intake latency? Inserts ~1,000,000 old rows in SQL (resolved waits with two events and their
 * signal each, rejected signals, run events; 40 days old), then sends signals (each resolving an
 * open wait, 202 `received`) at a steady rate:
 *
 *  1. "before": with the retention job held back;
 *  2. "in turns": the job started, then paused and resumed every WINDOW_MS by holding its
 *     advisory lock (PURGE_LOCK: a run that finds it held stands down). Signals sent while it
 *     worked are compared with those sent while it was paused, in the same minute: on a shared
 *     machine, noise that lasts longer than a window falls on both sides alike;
 *  3. "after", if the purge has finished within BENCH_RETENTION_WAIT_S.
 *
 * Progress is read from Postgres's cumulative statistics (deleted tuples) and the end from
 * first-row index lookups, never by counting rows.
 */
import postgres from "postgres";
import { PURGE_LOCK } from "../src/retention/purge-old-records.ts";
import { closedLoop, openLoop, type LoadResult } from "./load.ts";
import { settle } from "./cpu.ts";
import { fmtMs, fmtRate, now, summarize, table, type Summary } from "./stats.ts";

export interface RetentionBenchOptions {
  url: string;
  concurrency: number;
  ratePerS: number;
  /** Each of "before" and "after"; "in turns" lasts twice as long. */
  phaseMs: number;
  /** About this many rows are inserted (80 % of them in resolved waits' families). */
  rows: number;
  /** How long to wait for the purge to finish after the measured phases (then "after" runs). */
  waitMs: number;
  log(msg: string): void;
  guard<T>(p: Promise<T>): Promise<T>;
  openWait(run: string, body: Record<string, unknown>): Promise<string>;
  sendSignal(run: string, payload: unknown): Promise<string>;
}

export interface RetentionBenchResult {
  rowsInserted: number;
  insertSeconds: number;
  before: Summary;
  /** Signals sent while the purge was at work, and while it was paused, in turns. */
  purging: Summary;
  paused: Summary;
  /** Absent when the purge was still at work BENCH_RETENTION_WAIT_S after the measured phases. */
  after?: Summary;
  failed: number;
  /** Share of twice-a-second samples, while the purge ran, that saw autovacuum at work on our tables. */
  autovacuumShare: number;
  /** Rows deleted while the purge was at work (not paused), and for how long. */
  rowsPurgedInTurns: number;
  purgingSeconds: number;
  rowsPurged: number;
  purgeSeconds: number;
  purgeFinished: boolean;
}

/** How long each turn (purge at work, purge paused) lasts. */
const WINDOW_MS = 5000;
/** Signals sent this soon after a resume count for neither side (the job looks again within a second). */
const RESUME_MARGIN_MS = 1500;
const PURGE_STALL_MS = 20_000;

export async function retentionBench(o: RetentionBenchOptions): Promise<RetentionBenchResult> {
  const c = postgres(o.url, { max: 3, onnotice: () => {} });
  const lock = postgres(o.url, { max: 1, onnotice: () => {} }); // one session: the pause is a session lock
  try {
    // Hold the job back (the sweep keeps a pending run time as it is): "before" runs without it.
    await c`select graphile_worker.add_job('purge_old_records', '{}'::json, run_at := now() + interval '1 day', job_key := 'retention', job_key_mode := 'replace')`;

    const waits = Math.round(o.rows / 5); // a wait, two events and its signal: 4 rows each, 80% of the rows
    const loose = Math.round(o.rows / 10); // rejected signals, and run events with no wait: 10% each
    o.log(`retention: inserting ${waits} resolved waits (each with 2 events and 1 signal), ${loose} rejected signals and ${loose} run events, 40 days old`);
    const t0 = now();
    await c.begin(async (tx) => {
      // The events trigger would NOTIFY once per event: not what a month of history did at once.
      await tx`set local session_replication_role = replica`;
      // Their runs first, as the service writes them: waits and events reference runs (not checked
      // here, triggers being off, but the history should be one the service could have made).
      await tx`insert into signalbox.runs (run_id) select 'old-' || g from generate_series(0, least(${waits}::int, 99999)) g on conflict do nothing`;
      await tx`
        insert into signalbox.waits (id, run_id, signal, status, created_at, resolved_at, signal_id, resolution_event_id, callback_url, delivery_status)
        select 'wt_old_' || g, 'old-' || (g % 100000), 'bench-old-' || (g % 7), 'received',
               now() - interval '41 days' + g * interval '1 ms', now() - interval '40 days' + g * interval '1 ms', 'sg_old_' || g, g,
               'http://127.0.0.1:9/resume', 'delivered'
        from generate_series(1, ${waits}::int) g`;
      await tx`
        insert into signalbox.signals (id, run_id, signal, sequence, outcome, payload, payload_hash, received_at, wait_id)
        select 'sg_old_' || g, 'old-' || (g % 100000), 'bench-old-' || (g % 7), g, 'received', '{"old":true}', null,
               now() - interval '40 days' + g * interval '1 ms', 'wt_old_' || g
        from generate_series(1, ${waits}::int) g`;
      await tx`
        insert into signalbox.events (run_id, type, wait_id, signal_id, data, occurred_at)
        select 'old-' || (g % 100000), t.type, 'wt_old_' || g, t.signal_id, '{}'::jsonb, now() - interval '40 days' + g * interval '1 ms'
        from generate_series(1, ${waits}::int) g,
             lateral (values ('signal.waiting', null), ('signal.received', 'sg_old_' || g)) as t(type, signal_id)`;
      await tx`
        insert into signalbox.signals (id, run_id, signal, outcome, payload, received_at)
        select 'sg_rej_' || g, 'old-' || (g % 100000), 'bench-old-0', 'rejected_not_waiting', '{"old":true}', now() - interval '40 days' + g * interval '1 ms'
        from generate_series(1, ${loose}::int) g`;
      await tx`
        insert into signalbox.events (run_id, type, data, occurred_at)
        select 'old-' || (g % 100000), case when g % 2 = 0 then 'run.paused' else 'run.resumed' end, '{}'::jsonb, now() - interval '40 days' + g * interval '1 ms'
        from generate_series(1, ${loose}::int) g`;
    });
    // What autovacuum would have done over the month: statistics and the visibility map.
    for (const table of ["waits", "signals", "events"]) await c.unsafe(`vacuum (analyze) signalbox.${table}`);
    const rowsInserted = waits * 4 + loose * 2;
    const insertSeconds = (now() - t0) / 1000;
    o.log(`retention: ${rowsInserted} rows inserted and vacuumed in ${insertSeconds.toFixed(1)} s`);

    const count = Math.round((o.ratePerS * o.phaseMs) / 1000);
    o.log(`retention: opening ${4 * count} waits (no callback) for ${4 * count} signals at ${o.ratePerS}/s`);
    const runs = Array.from({ length: 4 * count }, (_, i) => `ret-${i}`);
    const opened = await o.guard(
      closedLoop({ concurrency: o.concurrency, durationMs: Infinity, limit: runs.length, op: (i) => o.openWait(runs[i]!, { timeout_s: 3600 }).then(() => {}) }),
    );
    if (opened.failed > 0) throw new Error(`retention: ${opened.failed} waits failed to open`);
    let failed = 0;
    /** `n` signals at the steady rate from run `offset` on; each request's send time and latency are kept. */
    const intake = async (offset: number, n: number) => {
      const sent: Array<{ at: number; ms: number }> = [];
      const load: LoadResult = await o.guard(
        openLoop({
          ratePerS: o.ratePerS,
          count: n,
          op: async (i) => {
            const at = now();
            await o.sendSignal(runs[offset + i]!, { i });
            sent.push({ at, ms: now() - at });
          },
        }),
      );
      failed += load.failed;
      return sent;
    };
    const deleted = async () => {
      const [r] = await c<Array<{ n: string }>>`
        select coalesce(sum(n_tup_del), 0)::text as n from pg_stat_user_tables where schemaname = 'signalbox'`;
      return Number(r!.n);
    };
    /** Any old row left? Three first-row lookups on the purge's own indexes: cheap enough to ask twice a second. */
    const oldRowsLeft = async () => {
      const [r] = await c<Array<{ left: boolean }>>`
        select exists (select 1 from signalbox.waits where status <> 'waiting' and resolved_at < now() - interval '30 days')
            or exists (select 1 from signalbox.signals where wait_id is null and received_at < now() - interval '30 days')
            or exists (select 1 from signalbox.events where wait_id is null and occurred_at < now() - interval '30 days') as left`;
      return r!.left;
    };

    let quiet = await settle();
    o.log(`retention: "before" (purge held back), machine ${(quiet.busy * 100).toFixed(0)}% busy after ${(quiet.waitedMs / 1000).toFixed(1)} s of settling`);
    const before = summarize((await intake(0, count)).map((s) => s.ms));

    quiet = await settle();
    o.log(`retention: "in turns": starting the purge job (machine ${(quiet.busy * 100).toFixed(0)}% busy), pausing and resuming it every ${WINDOW_MS / 1000} s`);
    const deletedBefore = await deleted();
    const purgeStarted = now();
    await c`select graphile_worker.add_job('purge_old_records', '{}'::json, run_at := now(), job_key := 'retention', job_key_mode := 'replace')`;
    let purgeEndedAt: number | undefined;
    let watching = true;
    let samples = 0;
    let vacuuming = 0;
    let lastDeleted = deletedBefore;
    let lastProgressAt = now();
    const watcher = (async () => {
      while (watching) {
        await new Promise((r) => setTimeout(r, 500));
        if (purgeEndedAt === undefined) {
          const [v] = await c<Array<{ n: number }>>`select count(*)::int as n from pg_stat_activity where backend_type = 'autovacuum worker' and query like '%signalbox.%'`;
          samples++;
          if (v!.n > 0) vacuuming++;
        }
        const d = await deleted();
        if (d > lastDeleted) {
          lastDeleted = d;
          lastProgressAt = now();
        }
        if (purgeEndedAt === undefined && !(await oldRowsLeft())) purgeEndedAt = now();
      }
    })();
    // The turns: [from, to) while the purge works, and while it is paused.
    const working: Array<[number, number]> = [];
    const pausedTurns: Array<[number, number]> = [];
    let turning = true;
    let rowsPurgedInTurns = 0;
    let purgingMs = 0;
    const turns = (async () => {
      let from = purgeStarted;
      let deletedAt = deletedBefore;
      while (turning) {
        await new Promise((r) => setTimeout(r, WINDOW_MS));
        if (!turning) {
          working.push([from, now()]);
          break;
        }
        await lock`select pg_advisory_lock(hashtext(${PURGE_LOCK}))`; // waits for a batch in flight
        const pausedAt = now();
        working.push([from, pausedAt]);
        purgingMs += pausedAt - from;
        await new Promise((r) => setTimeout(r, 1200)); // statistics are flushed about once a second
        const d = await deleted();
        rowsPurgedInTurns += d - deletedAt;
        deletedAt = d;
        await new Promise((r) => setTimeout(r, WINDOW_MS - 1200));
        const resumedAt = now();
        await lock`select pg_advisory_unlock(hashtext(${PURGE_LOCK}))`;
        pausedTurns.push([pausedAt, resumedAt]);
        from = resumedAt + RESUME_MARGIN_MS;
      }
    })();
    const inTurns = await intake(count, 2 * count);
    turning = false;
    await turns;
    const within = (spans: Array<[number, number]>) => inTurns.filter((s) => spans.some(([a, b]) => s.at >= a && s.at < b)).map((s) => s.ms);
    const purging = summarize(within(working));
    const paused = summarize(within(pausedTurns));
    o.log(`retention: turns over (${working.length} at work, ${pausedTurns.length} paused); ${lastDeleted - deletedBefore} rows purged so far; waiting up to ${o.waitMs / 1000} s for the end`);

    const waitUntil = now() + o.waitMs;
    while (purgeEndedAt === undefined && now() - lastProgressAt < PURGE_STALL_MS && now() < waitUntil) {
      await new Promise((r) => setTimeout(r, 1000));
    }
    watching = false;
    await watcher;
    let after: Summary | undefined;
    if (purgeEndedAt !== undefined) {
      quiet = await settle();
      o.log(`retention: "after" the purge, machine ${(quiet.busy * 100).toFixed(0)}% busy after ${(quiet.waitedMs / 1000).toFixed(1)} s of settling`);
      after = summarize((await intake(3 * count, count)).map((s) => s.ms));
    } else {
      o.log(`retention: the purge is still at work; no "after" phase (BENCH_RETENTION_WAIT_S to wait longer)`);
    }
    const rowsPurged = purgeEndedAt !== undefined ? rowsInserted : (await deleted()) - deletedBefore;
    return {
      rowsInserted,
      insertSeconds,
      before,
      purging,
      paused,
      ...(after ? { after } : {}),
      failed,
      autovacuumShare: samples > 0 ? vacuuming / samples : NaN,
      rowsPurgedInTurns,
      purgingSeconds: purgingMs / 1000,
      rowsPurged,
      purgeSeconds: ((purgeEndedAt ?? now()) - purgeStarted) / 1000,
      purgeFinished: purgeEndedAt !== undefined,
    };
  } finally {
    await lock.end({ timeout: 5 });
    await c.end({ timeout: 5 });
  }
}

/** The target: intake p99 while purging at most 20 % above the same minute's p99 while paused. */
export const RETENTION_P99_RATIO = 1.2;

/** Prints the retention figures next to pgbench's; true when the target is met. */
export function printRetention(r: RetentionBenchResult, pgbenchTps: number, ratePerS: number): boolean {
  const ratio = r.purging.p99 / r.paused.p99;
  const ok = ratio <= RETENTION_P99_RATIO;
  const vsBefore = r.purging.p99 / r.before.p99;
  const lat = (s: Summary) => `p50 ${fmtMs(s.p50)} / p99 ${fmtMs(s.p99)} / max ${fmtMs(s.max)} (n=${s.count})`;
  console.log("\n== retention ==");
  console.log(
    table(
      ["metric", "value", "target", "result"],
      [
        ["pgbench single-row INSERT", `${fmtRate(pgbenchTps)} tps`, "", ""],
        ["old rows inserted (SQL, one transaction)", `${r.rowsInserted} in ${r.insertSeconds.toFixed(1)} s`, "", ""],
        [`intake @ ${ratePerS}/s, before (job held back)`, lat(r.before), "", ""],
        [`intake @ ${ratePerS}/s, in turns: purge at work`, lat(r.purging), "", ""],
        [`intake @ ${ratePerS}/s, in turns: purge paused`, lat(r.paused), "", ""],
        [`intake @ ${ratePerS}/s, after the purge`, r.after ? lat(r.after) : "n/a (the purge was still at work)", "", ""],
        ["intake p99 purging / paused (same minute)", `${ratio.toFixed(2)}x`, `<= ${RETENTION_P99_RATIO}x`, ok ? "PASS" : "FAIL"],
        ["intake p99 purging / before", `${vsBefore.toFixed(2)}x`, "", ""],
        ["autovacuum at work on our tables while purging", `${(r.autovacuumShare * 100).toFixed(0)}% of the time`, "", ""],
        ["rows purged while at work", `${r.rowsPurgedInTurns} in ${r.purgingSeconds.toFixed(1)} s (${fmtRate(r.rowsPurgedInTurns / r.purgingSeconds)} rows/s)`, "", ""],
        [
          "rows purged in all",
          `${r.rowsPurged} in ${r.purgeSeconds.toFixed(1)} s${r.purgeFinished ? ", all" : `, ${r.rowsInserted - r.rowsPurged} still to go`}`,
          "",
          "",
        ],
      ],
    ),
  );
  if (r.failed > 0) console.log(`  ${r.failed} signals failed (left out of the figures)`);
  return ok;
}
