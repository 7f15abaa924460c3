/**
 * `npm run bench:console`: how long each console page takes with 100,000 open waits.
 *
 * Starts a throwaway embedded Postgres (or uses BENCH_DATABASE_URL) and signalbox as its own
 * process, seeds the database directly with SQL (BENCH_CONSOLE_WAITS open waits, default
 * 100,000, over 10 signal names, a tenth of them approvals with metadata; 20,000 waits resolved
 * and 10,000 rejected signals over the last day; 2,000 failing deliveries), signs in, and asks
 * for every page BENCH_CONSOLE_ROUNDS times (20), in turn. Prints the median and the slowest
 * answer per page (on localhost: server time plus a loopback round trip), against the 200 ms
 * target, and EXPLAIN ANALYZE of the overview's counts.
 */
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { createDatabase, startServer } from "./postgres.ts";
import { apiClient, startService } from "./service.ts";
import { fmtMs, now, summarize, table } from "./stats.ts";

const env = process.env;
const WAITS = Number(env.BENCH_CONSOLE_WAITS ?? 100_000);
const ROUNDS = Number(env.BENCH_CONSOLE_ROUNDS ?? 20);
const TARGET_MS = 200;
const API_KEY = `bench_${randomBytes(12).toString("hex")}`;

const server = await startServer(env, { statements: false });
const db = await createDatabase(server.url, "signalbox_console_bench");
const service = await startService({ DATABASE_URL: db.url, SIGNALBOX_API_KEYS: API_KEY, LOG_LEVEL: "warn" });
const sql = postgres(db.url, { max: 1, onnotice: () => {} });
try {
  const api = apiClient(service.baseUrl, API_KEY);
  for (let i = 0; i < 10; i++) {
    const body = i === 0 ? { description: "Manager approves", auth: { scheme: "none" }, responses: ["approve", "reject"] } : { auth: { scheme: "none" } };
    const res = await api("PUT", `/signal-types/${i === 0 ? "approval" : `type-${i}`}`, body);
    if (res.status !== 201) throw new Error(`PUT signal type: ${res.status}`);
  }
  const seeded = now();
  await seed(sql);
  process.stderr.write(`seeded ${WAITS} open waits and the rest in ${fmtMs(now() - seeded)}\n`);

  const cookie = await signIn(service.baseUrl);
  const soon = new Date(Date.now() + 3600_000).toISOString().slice(0, 19);
  const pages = [
    "/console/overview",
    "/console/waits",
    "/console/waits?meta=assignee%3Duser-7",
    "/console/waits?kind=timer",
    `/console/waits?deadline_before=${soon}`,
    "/console/waits?signal=type-3&meta=assignee%3Duser-7",
    "/console/approvals",
    "/console/approvals?signal=approval&meta=assignee%3Duser-7",
    "/console/runs/run-77",
    "/console/signals",
    "/console/signals?outcome=rejected",
    "/console/signals?signal=approval&outcome=rejected",
    "/console/deliveries",
    "/console/deliveries?status=failed&host=engine-3.internal%3A9000",
    "/console/signal-types",
    "/console/signal-types/approval",
  ];
  const times = new Map(pages.map((p) => [p, [] as number[]]));
  for (const p of pages) await get(service.baseUrl + p, cookie); // warm: compiled schemas, plans, caches
  for (let r = 0; r < ROUNDS; r++) {
    for (const p of pages) {
      const t = now();
      await get(service.baseUrl + p, cookie);
      times.get(p)!.push(now() - t);
    }
  }
  const rows = pages.map((p) => {
    const s = summarize(times.get(p)!);
    return [p, fmtMs(s.p50), fmtMs(s.max), s.max < TARGET_MS ? "ok" : "OVER"];
  });
  console.log(`\nconsole pages with ${WAITS.toLocaleString("en")} open waits (${ROUNDS} rounds; target < ${TARGET_MS} ms)\n`);
  console.log(table(["page", "median", "slowest", ""], rows));
  console.log("\noverview counts, EXPLAIN ANALYZE:");
  await explainOverview(sql);
} finally {
  await sql.end({ timeout: 5 });
  await service.stop();
  await db.drop();
  await server.stop();
}

async function get(url: string, cookie: string): Promise<void> {
  const res = await fetch(url, { headers: { cookie }, redirect: "manual" });
  await res.text();
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
}

async function signIn(baseUrl: string): Promise<string> {
  const res = await fetch(`${baseUrl}/console/sign-in`, {
    method: "POST",
    body: new URLSearchParams({ credential: API_KEY, name: "bench", next: "/console/overview" }),
    headers: { "content-type": "application/x-www-form-urlencoded" },
    redirect: "manual",
  });
  if (res.status !== 303) throw new Error(`sign-in: ${res.status}`);
  return res.headers.getSetCookie()[0]!.split(";")[0]!;
}

/** Rows as the service would have written them, made in a few set-based statements. */
async function seed(q: postgres.Sql): Promise<void> {
  const resolved = 20_000;
  const total = WAITS + resolved;
  await q.unsafe(`insert into signalbox.runs (run_id) select 'run-' || g from generate_series(1, ${total}) g`);
  // Open waits: created over the last week; deadlines over the next two days (1 in 100 within the hour), some never.
  await q.unsafe(`
    insert into signalbox.waits (id, run_id, signal, status, created_at, timeout_at, metadata, kind, fires_at, source)
    select 'wt_' || lpad(g::text, 12, '0'), 'run-' || g,
           case when g % 10 = 0 then 'approval' when g % 50 = 1 then 'nap-' || (g % 5) else 'type-' || (g % 9 + 1) end,
           'waiting', now() - (g % 10080) * interval '1 minute',
           case when g % 7 = 0 then null when g % 100 = 0 then now() + (g % 60) * interval '1 minute' else now() + (g % 2880) * interval '1 minute' end,
           case when g % 3 = 0 then jsonb_build_object('assignee', 'user-' || (g % 100), 'order_id', 'o-' || g) else '{}'::jsonb end,
           case when g % 50 = 1 then 'timer' else 'external' end,
           case when g % 50 = 1 then now() + interval '1 hour' else null end,
           case when g % 50 = 1 then '{"delay_s": 3600}'::jsonb else null end
    from generate_series(1, ${WAITS}) g`);
  // Resolved over the last day: received, timed out, cancelled; a tenth with a failing callback.
  await q.unsafe(`
    insert into signalbox.waits (id, run_id, signal, status, created_at, resolved_at, resolution_event_id, signal_id, callback_url, delivery_status, delivery_attempts, delivery_last_error)
    select 'wt_' || lpad(g::text, 12, '0'), 'run-' || g, 'type-' || (g % 9 + 1), s.status,
           now() - interval '2 days', now() - (g % 1440) * interval '1 minute', g,
           case when s.status = 'received' then 'sg_' || g else null end,
           case when g % 10 = 0 then 'http://engine-' || (g % 5) || '.internal:9000/resume' else null end,
           case when g % 10 = 0 then case when g % 20 = 0 then 'failed' else 'pending' end else 'none' end,
           case when g % 10 = 0 then 3 else 0 end,
           case when g % 10 = 0 then 'HTTP 503' else null end
    from generate_series(${WAITS + 1}, ${total}) g
    cross join lateral (select (array['received', 'timed_out', 'cancelled'])[g % 3 + 1] as status) s`);
  await q.unsafe(`
    insert into signalbox.delivery_attempts (wait_id, attempt, event_id, started_at, duration_ms, status_code, error, outcome, callback_host, latest)
    select w.id, a, w.resolution_event_id, w.resolved_at + a * interval '1 second', 12, 503, 'HTTP 503',
           case when a < 3 then 'retry' when w.delivery_status = 'failed' then 'failed' else 'retry' end,
           substring(w.callback_url from '//([^/]+)'), a = 3
    from signalbox.waits w cross join generate_series(1, 3) a
    where w.callback_url is not null`);
  await q.unsafe(`
    insert into signalbox.signals (id, run_id, signal, outcome, payload, received_at, validation_errors)
    select 'sg_r' || g, 'run-' || g, case when g % 4 = 0 then 'approval' else 'type-' || (g % 9 + 1) end,
           case when g % 4 = 0 then 'rejected_invalid_payload' else 'rejected_not_waiting' end,
           '{"response": "maybe", "n": ' || g || '}', now() - (g % 1440) * interval '1 minute',
           case when g % 4 = 0 then '[{"path": "/response", "message": "must be one of approve, reject"}]'::jsonb else null end
    from generate_series(1, 10000) g`);
  await q.unsafe("analyze");
}

async function explainOverview(q: postgres.Sql): Promise<void> {
  const statements: Array<[string, string]> = [
    ["open waits by signal", "select signal, count(*) from signalbox.waits where status = 'waiting' group by signal"],
    ["due within the hour", "select count(*) from signalbox.waits where status = 'waiting' and timeout_at >= now() and timeout_at < now() + interval '1 hour'"],
    ["resolved, last day", "select status, count(*) from signalbox.waits where status <> 'waiting' and resolved_at >= now() - interval '1 day' group by 1"],
    ["dead letters, last day", "select count(*) from signalbox.signals where wait_id is null and sequence is null and received_at >= now() - interval '1 day'"],
    [
      "failing deliveries",
      "select w.status, count(*) from signalbox.delivery_attempts a cross join lateral (select w.delivery_status as status from signalbox.waits w where w.id = a.wait_id and w.delivery_attempts = a.attempt and w.delivery_status in ('pending', 'failed') limit 1) w where a.latest and a.outcome <> 'delivered' group by 1",
    ],
  ];
  for (const [name, text] of statements) {
    const plan = (await q.unsafe(`explain (analyze, format json) ${text}`)) as unknown as Array<{ "QUERY PLAN": Array<{ Plan: PlanNode; "Execution Time": number }> }>;
    const root = plan[0]!["QUERY PLAN"][0]!;
    const scans: string[] = [];
    const walk = (n: PlanNode) => {
      if (/Scan/.test(n["Node Type"])) scans.push(`${n["Node Type"]}${n["Index Name"] ? ` ${n["Index Name"]}` : ""}${n["Relation Name"] ? ` on ${n["Relation Name"]}` : ""}`);
      for (const c of n.Plans ?? []) walk(c);
    };
    walk(root.Plan);
    console.log(`  ${name}: ${root["Execution Time"].toFixed(1)} ms (${scans.join("; ")})`);
  }
}

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Relation Name"?: string;
  Plans?: PlanNode[];
}
