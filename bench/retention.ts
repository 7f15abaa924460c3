/**
 * `npm run bench -- --retention`: does the retention job's purge of a million old rows move
 * intake latency? Inserts ~1,000,000 old rows in SQL (resolved waits with two events and their
 * signal each, rejected signals, run events; 40 days old), then measures intake (one signal
 * resolving an open wait, 202 `received`) at a steady rate three times: with the retention job
 * held back, while it works through the rows, and once it has finished (on a shared machine the
 * first and the last show how much of a difference is noise). Progress of the purge is read from
 * Postgres's cumulative statistics (deleted tuples) and its end from first-row index lookups,
 * never by counting rows.
 */
import postgres from "postgres";
import { closedLoop, openLoop, type LoadResult } from "./load.ts";
import { settle } from "./cpu.ts";
import { fmtMs, fmtRate, now, summarize, table, type Summary } from "./stats.ts";

export interface RetentionBenchOptions {
  url: string;
  concurrency: number;
  ratePerS: number;
  phaseMs: number;
  /** About this many rows are inserted (80 % of them in resolved waits' families). */
  rows: number;
  /** How long to wait for the purge to finish after the measured phase (then the after phase runs). */
  waitMs: number;
  log(msg: string): void;
  guard<T>(p: Promise<T>): Promise<T>;
  openWait(run: string, body: Record<string, unknown>): Promise<string>;
  sendSignal(run: string, payload: unknown): Promise<string>;
}

export interface RetentionBenchResult {
  rowsInserted: number;
  insertSeconds: number;
  baseline: Summary;
  duringPurge: Summary;
  /** Absent when the purge was still at work BENCH_RETENTION_WAIT_S after the measured phase. */
  after?: Summary;
  baselineLoad: LoadResult;
  purgeLoad: LoadResult;
  afterLoad?: LoadResult;
  /** Share of the watcher's samples (twice a second, from the purge's start to its end) that saw autovacuum at work on our tables. */
  autovacuumShare: number;
  /** Seconds of the measured phase during which the purge was still deleting (only signals sent then count as "while purging"). */
  overlapS: number;
  rowsPurged: number;
  purgeSeconds: number;
  purgeFinished: boolean;
}

const PURGE_STALL_MS = 20_000;

export async function retentionBench(o: RetentionBenchOptions): Promise<RetentionBenchResult> {
  const c = postgres(o.url, { max: 2, onnotice: () => {} });
  try {
    // Hold the job back (the sweep keeps a pending run time as it is): the baseline runs without it.
    await c`select graphile_worker.add_job('purge_old_records', '{}'::json, run_at := now() + interval '1 day', job_key := 'retention', job_key_mode := 'replace')`;

    const waits = Math.round(o.rows / 5); // a wait, two events and its signal: 4 rows each, 80% of the rows
    const loose = Math.round(o.rows / 10); // rejected signals, and run events with no wait: 10% each
    o.log(`retention: inserting ${waits} resolved waits (each with 2 events and 1 signal), ${loose} rejected signals and ${loose} run events, 40 days old`);
    const t0 = now();
    await c.begin(async (tx) => {
      // The events trigger would NOTIFY once per event: not what a month of history did at once.
      await tx`set local session_replication_role = replica`;
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
    o.log(`retention: opening ${3 * count} waits (no callback) for three phases of ${count} signals at ${o.ratePerS}/s`);
    const runs = Array.from({ length: 3 * count }, (_, i) => `ret-${i}`);
    const opened = await o.guard(
      closedLoop({ concurrency: o.concurrency, durationMs: Infinity, limit: runs.length, op: (i) => o.openWait(runs[i]!, { timeout_s: 3600 }).then(() => {}) }),
    );
    if (opened.failed > 0) throw new Error(`retention: ${opened.failed} waits failed to open`);
    /** `count` signals at the steady rate; each request's send time and latency are kept. */
    const intake = async (offset: number) => {
      const sent: Array<{ at: number; ms: number }> = [];
      const load = await o.guard(
        openLoop({
          ratePerS: o.ratePerS,
          count,
          op: async (i) => {
            const at = now();
            await o.sendSignal(runs[offset + i]!, { i });
            sent.push({ at, ms: now() - at });
          },
        }),
      );
      return { load, sent };
    };

    let quiet = await settle();
    o.log(`retention: baseline (purge held back), machine ${(quiet.busy * 100).toFixed(0)}% busy after ${(quiet.waitedMs / 1000).toFixed(1)} s of settling`);
    const { load: baselineLoad } = await intake(0);
    const baseline = summarize(baselineLoad.latenciesMs);

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
    quiet = await settle();
    o.log(`retention: starting the purge job, machine ${(quiet.busy * 100).toFixed(0)}% busy`);
    const deletedBefore = await deleted();
    const purgeStarted = now();
    await c`select graphile_worker.add_job('purge_old_records', '{}'::json, run_at := now(), job_key := 'retention', job_key_mode := 'replace')`;
    // Watch it from here to the end (statistics are flushed about once a second).
    let lastDeleted = deletedBefore;
    let lastProgressAt = now();
    let purgeEndedAt: number | undefined;
    let watching = true;
    let samples = 0;
    let vacuuming = 0;
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
    const phaseStarted = now();
    const { load: purgeLoad, sent: purgeSent } = await intake(count);
    const phaseEnded = now();
    o.log(`retention: measured phase over; ${lastDeleted - deletedBefore} rows purged so far; waiting for the purge to finish`);
    const waitUntil = now() + o.waitMs;
    while (purgeEndedAt === undefined && now() - lastProgressAt < PURGE_STALL_MS && now() < waitUntil) {
      await new Promise((r) => setTimeout(r, 1000));
    }
    watching = false;
    await watcher;
    const end = purgeEndedAt ?? lastProgressAt;
    // Only the signals sent while the purge was at work (it may end before the phase does).
    const duringPurge = summarize(purgeSent.filter((s) => s.at <= end).map((s) => s.ms));
    let afterLoad: LoadResult | undefined;
    if (purgeEndedAt !== undefined) {
      quiet = await settle();
      o.log(`retention: after the purge, machine ${(quiet.busy * 100).toFixed(0)}% busy after ${(quiet.waitedMs / 1000).toFixed(1)} s of settling`);
      afterLoad = (await intake(2 * count)).load;
    } else {
      o.log(`retention: the purge is still at work; no after phase (BENCH_RETENTION_WAIT_S to wait longer)`);
    }
    lastDeleted = await deleted();
    const rowsPurged = purgeEndedAt !== undefined ? rowsInserted : lastDeleted - deletedBefore;
    const overlapS = Math.max(0, (Math.min(end, phaseEnded) - phaseStarted) / 1000);
    return {
      rowsInserted,
      insertSeconds,
      baseline,
      duringPurge,
      baselineLoad,
      purgeLoad,
      ...(afterLoad ? { after: summarize(afterLoad.latenciesMs), afterLoad } : {}),
      overlapS,
      autovacuumShare: samples > 0 ? vacuuming / samples : NaN,
      rowsPurged,
      purgeSeconds: ((purgeEndedAt ?? now()) - purgeStarted) / 1000,
      purgeFinished: purgeEndedAt !== undefined,
    };
  } finally {
    await c.end({ timeout: 5 });
  }
}

/** The target: intake p99 while purging at most 20 % above the baseline's. */
export const RETENTION_P99_RATIO = 1.2;

/** Prints the retention figures next to pgbench's; true when the target is met. */
export function printRetention(r: RetentionBenchResult, pgbenchTps: number, ratePerS: number): boolean {
  const ratio = r.duringPurge.p99 / r.baseline.p99;
  const ok = ratio <= RETENTION_P99_RATIO; // failed requests are listed below the table
  const afterRatio = r.after ? r.duringPurge.p99 / r.after.p99 : NaN;
  const lat = (s: Summary) => `p50 ${fmtMs(s.p50)} / p99 ${fmtMs(s.p99)} / max ${fmtMs(s.max)} (n=${s.count})`;
  console.log("\n== retention ==");
  console.log(
    table(
      ["metric", "value", "target", "result"],
      [
        ["pgbench single-row INSERT", `${fmtRate(pgbenchTps)} tps`, "", ""],
        ["old rows inserted (SQL, one transaction)", `${r.rowsInserted} in ${r.insertSeconds.toFixed(1)} s`, "", ""],
        [`intake @ ${ratePerS}/s, purge held back`, lat(r.baseline), "", ""],
        [`intake @ ${ratePerS}/s, while purging`, lat(r.duringPurge), "", ""],
        [`intake @ ${ratePerS}/s, after the purge`, r.after ? lat(r.after) : "n/a (the purge was still at work)", "", ""],
        ["intake p99 while purging / before", `${ratio.toFixed(2)}x`, `<= ${RETENTION_P99_RATIO}x`, ok ? "PASS" : "FAIL"],
        ["intake p99 while purging / after (noise check)", Number.isNaN(afterRatio) ? "n/a" : `${afterRatio.toFixed(2)}x`, "", ""],
        ["autovacuum at work on our tables during the purge", `${(r.autovacuumShare * 100).toFixed(0)}% of the time`, "", ""],
        ["phase \"while purging\": signals sent before the purge ended", `${r.overlapS.toFixed(1)} of ${(r.purgeLoad.elapsedMs / 1000).toFixed(1)} s`, "", ""],
        [
          "rows purged",
          `${r.rowsPurged} in ${r.purgeSeconds.toFixed(1)} s (${fmtRate(r.rowsPurged / r.purgeSeconds)} rows/s)${r.purgeFinished ? ", all" : `, ${r.rowsInserted - r.rowsPurged} still to go`}`,
          "",
          "",
        ],
      ],
    ),
  );
  for (const [name, l] of [["baseline", r.baselineLoad], ["while purging", r.purgeLoad], ["after", r.afterLoad]] as const) {
    if (l && l.failed > 0) console.log(`  ${name}: ${l.failed} signals failed: ${[...l.errors].slice(0, 3).map(([m, n]) => `${n}x ${m}`).join("; ")}`);
  }
  return ok;
}
