/**
 * `npm run bench -- --scale`: does signalbox hold up with a million open waits (issue 13 item 6)?
 *
 *  1. On the bench's nearly empty database: intake (waits/s, then signals/s, each signal
 *     resolving a wait) and resume latency at a steady 200/s, as the default bench measures them.
 *  2. Builds BENCH_SCALE_WAITS open waits (1,000,000) in SQL, as `signalbox.open_wait` writes
 *     them: the run, the wait, its `signal.waiting` event and, for half of them, a deadline 1 to
 *     15 days ahead (none fires meanwhile). Such a deadline relies on the deadline alarm (no job
 *     of its own) unless the wait was opened while the alarm ran: OWN_JOB_EVERY of the timed
 *     waits have their own timeout job (graphile-worker's `_private_jobs` row, as
 *     `signalbox.add_job` inserts a job not yet due); the alarm is armed after the build. Over
 *     SCALE_SIGNALS declared signal names (a few popular, many rare), one or two open waits a
 *     run, every wait with metadata. Then VACUUM ANALYZE, as autovacuum would have over the
 *     weeks that built it, and a CHECKPOINT.
 *  3. The pending queries (`GET /waits?signal=…&status=waiting`, with a metadata filter, with
 *     `deadline_before`), each over distinct filters, sequentially and QUERY_CONCURRENCY at once,
 *     after WARM_UP_QUERIES of them untimed.
 *  4. Intake and resume again, now at scale; the service's RSS, and its heap in use after a
 *     forced full GC (bench/heap.ts), before the build, after it and after all.
 */
import { readFileSync } from "node:fs";
import postgres from "postgres";
import { cpuBetween, cpuSnapshot, settle } from "./cpu.ts";
import { closedLoop, type LoadResult } from "./load.ts";
import { fmtMs, fmtRate, now, summarize, table, type Summary } from "./stats.ts";

/** Signal names `scale-0` …: name 0 on about 1 in 10 waits, name k on about 1 in 40·√k. */
const SCALE_SIGNALS = 100;
/**
 * One in this many timed waits has a timeout job of its own: about the share opened while the
 * deadline alarm ran, with waits opened all the time (1,455/s in `npm run bench`); fewer otherwise.
 */
const OWN_JOB_EVERY = 10;
const QUERIES = 200;
const QUERY_CONCURRENCY = 4;
export const SCALE_TARGETS = { queryP99Ms: 20, ratio: 1.2 };

export interface IntakeFigures {
  waitsPerS: number;
  signalsPerS: number;
  failed: number;
}
export interface ResumeFigures {
  latency: Summary;
  missing: number;
}

export interface ScaleBenchOptions {
  url: string;
  waits: number;
  servicePid: number;
  /** Postgres's postmaster, for the CPU a query costs there (undefined: not measured). */
  postmasterPid?: number;
  log(msg: string): void;
  api<T = unknown>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** The default bench's intake phases (runs `<prefix>-<i>`): waits/s, then one signal per wait. */
  intake(prefix: string): Promise<IntakeFigures>;
  /** The default bench's resume latency at 200 signals/s. */
  resume(prefix: string): Promise<ResumeFigures>;
  /** The service's live heap after a forced GC (bench/heap.ts). */
  heap(): Promise<{ usedMiB: number }>;
}

export interface QueryFigures {
  name: string;
  filters: number;
  sequential: Summary;
  concurrent: Summary;
  /** Mean items a page (up to 50): the filters find waits. */
  items: number;
  failed: number;
  /** The slowest request's filter, and its time. */
  slowest: string;
  /** CPU a request, over both sets: signalbox's and Postgres's (ms; NaN where not measured). */
  cpuMs: { service: number; postgres: number };
  /** The service's young-generation collections over both sets, and their mean pause (its /metrics). */
  youngGc: { count: number; meanMs: number };
}

export interface ScaleBenchResult {
  waits: number;
  buildSeconds: number;
  vacuumSeconds: number;
  empty: { intake: IntakeFigures; resume: ResumeFigures };
  scale: { intake: IntakeFigures; resume: ResumeFigures };
  queries: QueryFigures[];
  rssMiB: { before: number; afterBuild: number; after: number; peak: number };
  /** The service's heap in use after a forced full GC, at the same three points. */
  heapMiB: { before: number; afterBuild: number; after: number };
  /** Waits of the built state no longer waiting at the end (a deadline fired early, or worse). */
  resolved: number;
}

/** Where the WAL is, and how many full-page images it has had: after a checkpoint, a page's first change writes all of it. */
async function walPosition(c: postgres.Sql): Promise<{ lsn: string; fpi: number }> {
  const [row] = await c<Array<{ lsn: string; fpi: string }>>`select pg_current_wal_lsn()::text as lsn, (select wal_fpi from pg_stat_wal)::text as fpi`;
  return { lsn: row!.lsn, fpi: Number(row!.fpi) };
}

function walSince(a: { lsn: string; fpi: number }, b: { lsn: string; fpi: number }, ops: number): { bytes: number; fullPages: number } {
  const at = (lsn: string) => lsn.split("/").reduce((high, part) => high * 2 ** 32 + Number.parseInt(part, 16), 0); // "hi/lo" in hex
  return { bytes: (at(b.lsn) - at(a.lsn)) / ops, fullPages: (b.fpi - a.fpi) / ops };
}

/** The service's resident set and its peak so far, from /proc. */
function rssMiB(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { rss: kib("VmRSS") / 1024, peak: kib("VmHWM") / 1024 };
}

/**
 * The state, in two statements. Wait g (1 … n) belongs to run `scale-<r>` (r = floor(2g/3): a
 * third of the runs hold two open waits, g = 3k and 3k + 1), created over the last week in order
 * of g; its signal name is drawn from a skewed spread, a run's second wait taking another name.
 */
export async function buildScaleState(c: postgres.Sql, n: number): Promise<void> {
  await c.begin(async (tx) => {
    // The events trigger would NOTIFY every run: the service would read a million notifications.
    await tx`set local session_replication_role = replica`;
    await tx`insert into signalbox.runs (run_id) select 'scale-' || r from generate_series(0, (2 * ${n}::bigint) / 3) r`;
    const [task] = await tx<Array<{ id: number }>>`select id from graphile_worker._private_tasks where identifier = 'expire_wait'`;
    if (!task) throw new Error("scale: graphile-worker has no expire_wait task yet (the warm-up opens waits with a timeout)");
    await tx`
      with spec as (
        select g, 'wt_' || lpad(g::text, 10, '0') || substr(md5(g::text), 1, 16) as id, 'scale-' || (2 * g) / 3 as run_id,
               -- a run's waits share g / 3; g % 3 = 1: the second one, 37 names further
               'scale-' || ((floor(${SCALE_SIGNALS} * power((hashint8(g / 3) & 2147483647)::float8 / 2147483648, 2))::int + (g % 3 = 1)::int * 37) % ${SCALE_SIGNALS}) as signal,
               now() - interval '7 days' * (1 - g::float8 / ${n}) as created_at,
               hashint8(g) & 2147483647 as h
        from generate_series(1, ${n}::bigint) g
      ), opened as (
        insert into signalbox.waits (id, run_id, signal, created_at, timeout_at, metadata, kind)
        select id, run_id, signal, created_at,
               case when g % 2 = 0 then (created_at + interval '8 days' + (h % 604800) * interval '1 second')::timestamptz(3) end,
               jsonb_build_object('order_id', 'o-' || g, 'customer', 'c-' || h % 20000, 'region', 'r-' || g % 8),
               'external'
        from spec
        returning id, run_id, signal, created_at, timeout_at
      ), events as (
        insert into signalbox.events (run_id, type, wait_id, data, occurred_at)
        select run_id, 'signal.waiting', id, jsonb_build_object('signal', signal, 'kind', 'external'), created_at from opened
      )
      insert into graphile_worker._private_jobs (task_id, payload, run_at, max_attempts, key)
      select ${task.id}, json_build_object('id', id), timeout_at, signalbox.job_max_attempts(), signalbox.job_key('expire_wait', id)
      from opened where timeout_at is not null and substr(id, 4, 10)::bigint % ${2 * OWN_JOB_EVERY} = 0`;
  });
  await c`select signalbox.arm_deadline_alarm()`; // for the earliest of the deadlines relying on it
}

/** The tables intake and resume write. */
const PHASE_TABLES = ["signalbox.runs", "signalbox.waits", "signalbox.events", "signalbox.signals", "signalbox.delivery_attempts", "graphile_worker._private_jobs"];

async function vacuumAndCheckpoint(c: postgres.Sql, tables: string[]) {
  for (const table of tables) await c.unsafe(`vacuum (analyze) ${table}`);
  await c`checkpoint`;
}

export async function scaleBench(o: ScaleBenchOptions): Promise<ScaleBenchResult> {
  const c = postgres(o.url, { max: 1, onnotice: () => {} });
  try {
    for (let i = 0; i < SCALE_SIGNALS; i++) {
      const r = await o.api("PUT", `/signal-types/scale-${i}`, { description: "scale bench", schema: null, auth: { scheme: "none" } });
      if (r.status !== 200 && r.status !== 201) throw new Error(`declaring scale-${i}: HTTP ${r.status}`);
    }
    const measure = async (label: string, prefix: string) => {
      // Both rounds start alike: the tables the phases write vacuumed and analysed (else
      // autovacuum comes to the empty round's writes during the scale round), and a checkpoint
      // just taken (after it, each page's first change writes all of it to the WAL, which the
      // build's checkpoint put on the scale round alone). A run with 1,000 waits built (A/A)
      // showed the second round 10–30 % slower at signals/s without this.
      await vacuumAndCheckpoint(c, PHASE_TABLES);
      const quiet = await settle({ maxMs: 60_000 });
      o.log(`scale: ${label}: intake and resume (machine ${(quiet.busy * 100).toFixed(0)}% busy after ${(quiet.waitedMs / 1000).toFixed(1)} s of settling)`);
      const intake = await o.intake(prefix);
      const walBefore = await walPosition(c);
      const resume = await o.resume(`${prefix}r`);
      const wal = walSince(walBefore, await walPosition(c), resume.latency.count);
      o.log(
        `scale: ${label}: ${fmtRate(intake.waitsPerS)} waits/s, ${fmtRate(intake.signalsPerS)} signals/s, resume p50 ${fmtMs(resume.latency.p50)} / p99 ${fmtMs(resume.latency.p99)}; ` +
          `WAL a resumed wait (opened, signalled, called back) ${(wal.bytes / 1024).toFixed(1)} KiB, ${wal.fullPages.toFixed(2)} full-page images`,
      );
      return { intake, resume };
    };
    const empty = await measure("empty", "e");
    const before = rssMiB(o.servicePid).rss;
    const heapBefore = (await o.heap()).usedMiB;

    o.log(`scale: building ${o.waits.toLocaleString("en")} open waits in SQL`);
    let t = now();
    await buildScaleState(c, o.waits);
    const buildSeconds = (now() - t) / 1000;
    o.log(`scale: built in ${buildSeconds.toFixed(1)} s; vacuum analyze, checkpoint`);
    t = now();
    await vacuumAndCheckpoint(c, ["signalbox.runs", "signalbox.waits", "signalbox.events", "graphile_worker._private_jobs"]); // the build's writes, flushed now rather than while the queries are timed
    const vacuumSeconds = (now() - t) / 1000;
    o.log(`scale: vacuumed in ${vacuumSeconds.toFixed(1)} s`);
    const afterBuild = rssMiB(o.servicePid).rss;
    const heapAfterBuild = (await o.heap()).usedMiB;

    const signal = (i: number) => `signal=scale-${POPULAR[i % POPULAR.length]}`;
    const base = Date.now();
    const filters: Array<[string, (i: number) => string]> = [
      ["signal, status=waiting", signal],
      ["… and a metadata filter", (i) => `${signal(i)}&${i % 2 === 0 ? `metadata.customer=c-${(i * 7919) % 20000}` : `metadata.region=r-${i % 8}`}`],
      ["… and deadline_before", (i) => `${signal(i)}&deadline_before=${new Date(base + DEADLINE_HOURS[i % DEADLINE_HOURS.length]! * 3_600_000).toISOString()}`],
    ];
    const warmUp = await warmUpQueries(o, filters.map(([, filter]) => filter));
    o.log(`scale: warm-up, not counted: ${WARM_UP_QUERIES} requests of the three kinds, ${QUERY_CONCURRENCY} at once: p50 ${fmtMs(warmUp.p50)} / p99 ${fmtMs(warmUp.p99)}`);
    await settle({ maxMs: 60_000 });
    const queries: QueryFigures[] = [];
    for (const [name, filter] of filters) queries.push(await pendingQuery(o, name, filter));
    const scale = await measure("at scale", "s");
    const after = rssMiB(o.servicePid);
    const heapAfter = (await o.heap()).usedMiB;
    o.log(`scale: heap in use after a full GC: ${heapBefore.toFixed(1)} MiB before the build, ${heapAfterBuild.toFixed(1)} after it, ${heapAfter.toFixed(1)} after all`);
    const [row] = await c<Array<{ n: number }>>`select count(*)::int as n from signalbox.waits where run_id like 'scale-%' and status <> 'waiting'`;
    return { waits: o.waits, buildSeconds, vacuumSeconds, empty, scale, queries, rssMiB: { before, afterBuild, after: after.rss, peak: after.peak }, heapMiB: { before: heapBefore, afterBuild: heapAfterBuild, after: heapAfter }, resolved: row!.n };
  } finally {
    await c.end({ timeout: 5 });
  }
}

/** Signal names asked for, from the most common (1 in 10 waits) to rare ones (1 in 200). */
const POPULAR = [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89];
/** deadline_before this many hours ahead: deadlines start a day ahead, so from none to most. */
const DEADLINE_HOURS = [25, 30, 48, 72, 120, 200, 330];

/**
 * Listing requests before the measured ones, untimed. A service's first few hundred run before
 * V8 has optimised the code they take, and on pool connections whose Postgres backends have not
 * read these tables yet: in a fresh service at a million waits, the first 600 (4 at once) had a
 * p50 of 11-12 ms, against 6-7 ms from then on. The scale figures are about the million waits,
 * not about a process's first seconds.
 */
const WARM_UP_QUERIES = 600;

async function warmUpQueries(o: ScaleBenchOptions, filters: Array<(i: number) => string>): Promise<Summary> {
  const latencies: number[] = [];
  await closedLoop({
    concurrency: QUERY_CONCURRENCY,
    durationMs: Infinity,
    limit: WARM_UP_QUERIES,
    op: async (i) => {
      const t = now();
      const r = await o.api("GET", `/waits?status=waiting&${filters[i % filters.length]!(i)}`);
      if (r.status !== 200) throw new Error(`warm-up: HTTP ${r.status}`);
      latencies.push(now() - t);
    },
  });
  return summarize(latencies);
}

/** QUERIES requests one at a time, then QUERIES more QUERY_CONCURRENCY at once; filter i of each is `filter(i)`. */
async function pendingQuery(o: ScaleBenchOptions, name: string, filter: (i: number) => string): Promise<QueryFigures> {
  let items = 0;
  let slowest = { ms: 0, filter: "" };
  const op = async (i: number) => {
    const t = now();
    const r = await o.api<{ items: unknown[] }>("GET", `/waits?status=waiting&${filter(i)}`);
    if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
    items += r.body.items.length;
    if (now() - t > slowest.ms) slowest = { ms: now() - t, filter: filter(i) };
  };
  const pids = { service: o.servicePid, postmaster: o.postmasterPid };
  const gcBefore = await youngCollections(o);
  const cpuBefore = cpuSnapshot(pids);
  const sequential: LoadResult = await closedLoop({ concurrency: 1, durationMs: Infinity, limit: QUERIES, op });
  const concurrent: LoadResult = await closedLoop({ concurrency: QUERY_CONCURRENCY, durationMs: Infinity, limit: QUERIES, op: (i) => op(i + QUERIES) });
  const cpu = cpuBetween(cpuBefore, cpuSnapshot(pids));
  const gcAfter = await youngCollections(o);
  const youngGc = { count: gcAfter.count - gcBefore.count, meanMs: ((gcAfter.seconds - gcBefore.seconds) * 1000) / (gcAfter.count - gcBefore.count) };
  const figures = {
    name,
    filters: new Set(Array.from({ length: 2 * QUERIES }, (_, i) => filter(i))).size,
    sequential: summarize(sequential.latenciesMs),
    concurrent: summarize(concurrent.latenciesMs),
    items: items / (sequential.ok + concurrent.ok),
    failed: sequential.failed + concurrent.failed,
    slowest: `${slowest.filter} (${fmtMs(slowest.ms)})`,
    cpuMs: { service: (cpu.serviceS * 1000) / (2 * QUERIES), postgres: (cpu.postgresS * 1000) / (2 * QUERIES) },
    youngGc,
  };
  o.log(
    `scale: ${name}: p50 ${fmtMs(figures.sequential.p50)} / p99 ${fmtMs(figures.sequential.p99)}, ${QUERY_CONCURRENCY} at once p99 ${fmtMs(figures.concurrent.p99)}; ` +
      `CPU a request: signalbox ${fmtMs(figures.cpuMs.service)}, Postgres ${fmtMs(figures.cpuMs.postgres)}; ` +
      `young-generation collections ${youngGc.count}, mean pause ${fmtMs(youngGc.meanMs)}; slowest: ${figures.slowest}`,
  );
  return figures;
}

/**
 * The service's young-generation collections so far, and the time they took (prom-client's
 * nodejs_gc_duration_seconds, kind "minor"). A scavenge stops every request: with rows kept
 * alive past their query (patches/postgres+*.patch) they took 9-13 ms each here, the four-at-once tail.
 */
async function youngCollections(o: ScaleBenchOptions): Promise<{ count: number; seconds: number }> {
  const r = await o.api<string>("GET", "/metrics");
  const read = (series: string) => Number(new RegExp(`^nodejs_gc_duration_seconds_${series}\\{kind="minor"\\} (\\S+)$`, "m").exec(String(r.body))?.[1] ?? 0);
  return { count: read("count"), seconds: read("sum") };
}

/** Prints the scale figures next to pgbench's; true when every target is met. */
export function printScale(r: ScaleBenchResult, pgbenchTps: number, ratePerS: number): boolean {
  const verdict = (ok: boolean) => (ok ? "PASS" : "FAIL");
  const ratio = (scale: number, empty: number) => `${(scale / empty).toFixed(2)}x`;
  const rows: string[][] = [
    ["pgbench single-row INSERT (this run)", `${fmtRate(pgbenchTps)} tps`, "", "", "", ""],
    ["open waits built (SQL), then VACUUM ANALYZE and CHECKPOINT", "", `${r.waits.toLocaleString("en")} in ${r.buildSeconds.toFixed(1)} s + ${r.vacuumSeconds.toFixed(1)} s`, "", "", ""],
  ];
  let ok = true;
  for (const q of r.queries) {
    const met = q.sequential.p99 <= SCALE_TARGETS.queryP99Ms && q.concurrent.p99 <= SCALE_TARGETS.queryP99Ms && q.failed === 0;
    ok &&= met;
    rows.push([
      `GET /waits ${q.name} (${q.filters} filters, ${q.items.toFixed(0)} items a page)`,
      "",
      `p50 ${fmtMs(q.sequential.p50)} / p99 ${fmtMs(q.sequential.p99)}; ${QUERY_CONCURRENCY} at once p99 ${fmtMs(q.concurrent.p99)}${q.failed ? `; ${q.failed} failed` : ""}`,
      "",
      `p99 <= ${SCALE_TARGETS.queryP99Ms} ms`,
      verdict(met),
    ]);
  }
  // Throughput may fall by at most 20 %, latency rise by at most 20 %.
  const within = (scale: number, empty: number, higherIsBetter: boolean) => (higherIsBetter ? scale >= empty / SCALE_TARGETS.ratio : scale <= empty * SCALE_TARGETS.ratio);
  const figure = (name: string, empty: number, scale: number, fmt: (x: number) => string, higherIsBetter: boolean, target: boolean) => {
    const met = within(scale, empty, higherIsBetter);
    if (target) ok &&= met;
    rows.push([name, fmt(empty), fmt(scale), ratio(scale, empty), target ? `within 20 %` : "", target ? verdict(met) : ""]);
  };
  figure("waits opened/s (timeout in an hour)", r.empty.intake.waitsPerS, r.scale.intake.waitsPerS, fmtRate, true, true);
  figure("signals/s, each resolving a wait", r.empty.intake.signalsPerS, r.scale.intake.signalsPerS, fmtRate, true, true);
  figure(`resume latency @ ${ratePerS}/s, 202 → callback, p50`, r.empty.resume.latency.p50, r.scale.resume.latency.p50, fmtMs, false, false);
  figure(`resume latency @ ${ratePerS}/s, 202 → callback, p99`, r.empty.resume.latency.p99, r.scale.resume.latency.p99, fmtMs, false, true);
  const rssOk = r.rssMiB.after <= SCALE_TARGETS.ratio * r.rssMiB.before;
  const heapOk = r.heapMiB.after <= SCALE_TARGETS.ratio * r.heapMiB.before;
  ok &&= rssOk && heapOk && r.resolved === 0;
  rows.push([
    "signalbox heap in use after a full GC (before the build; after it → after all)",
    `${r.heapMiB.before.toFixed(1)} MiB`,
    `${r.heapMiB.afterBuild.toFixed(1)} → ${r.heapMiB.after.toFixed(1)} MiB`,
    ratio(r.heapMiB.after, r.heapMiB.before),
    "flat (within 20 %)",
    verdict(heapOk),
  ]);
  rows.push([
    "signalbox RSS (before the build; after it → after all)",
    `${r.rssMiB.before.toFixed(0)} MiB`,
    `${r.rssMiB.afterBuild.toFixed(0)} → ${r.rssMiB.after.toFixed(0)} MiB (peak ${r.rssMiB.peak.toFixed(0)})`,
    ratio(r.rssMiB.after, r.rssMiB.before),
    "flat (within 20 %)",
    verdict(rssOk),
  ]);
  rows.push(["waits of the built state resolved meanwhile", "", String(r.resolved), "", "0", verdict(r.resolved === 0)]);
  console.log("\n== scale ==");
  console.log(table(["metric", "empty", "at scale", "at scale / empty", "target", "result"], rows));
  const failed = r.empty.intake.failed + r.scale.intake.failed + r.empty.resume.missing + r.scale.resume.missing;
  if (failed > 0) console.log(`  ${failed} intake requests failed or callbacks missing`);
  return ok;
}
