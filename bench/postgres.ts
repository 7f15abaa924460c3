import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { createLogger } from "../src/core/logger.ts";
import { startEmbeddedPostgres } from "../src/db/embedded.ts";

export interface BenchServer {
  /** A URL of the server (its database part is replaced per use), over TCP. */
  url: string;
  /** The same through the embedded cluster's Unix socket, as signalbox's default connects (else `url`). */
  localUrl: string;
  /** "embedded (temp dir)" or "BENCH_DATABASE_URL". */
  origin: string;
  /** The cluster's data dir when we run it (for CPU accounting). */
  dataDir?: string;
  /** Whether pg_stat_statements is loaded (opt-in: it costs a little throughput). */
  statements: boolean;
  stop(): Promise<void>;
}

/**
 * BENCH_DATABASE_URL when set, else a throwaway embedded cluster in a temp dir (removed by stop).
 * With `statements`, the embedded cluster is restarted once with pg_stat_statements preloaded.
 */
export async function startServer(env: NodeJS.ProcessEnv, opts: { statements: boolean; nested?: boolean }): Promise<BenchServer> {
  if (env.BENCH_DATABASE_URL) return { url: env.BENCH_DATABASE_URL, localUrl: env.BENCH_DATABASE_URL, origin: "BENCH_DATABASE_URL", statements: false, stop: async () => {} };
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-bench-"));
  // As root, Postgres runs as the `postgres` user: it must be able to reach its data dir.
  await fs.chmod(dir, 0o755);
  const remove = () => fs.rm(dir, { recursive: true, force: true });
  const log = createLogger("warn");
  let embedded: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
  try {
    embedded = await startEmbeddedPostgres(dir, log);
    if (opts.statements) {
      const c = postgres(embedded.url, { max: 1, onnotice: () => {} });
      await c.unsafe("alter system set shared_preload_libraries = 'pg_stat_statements'");
      // Nested: also the statements run inside functions (accept_signals, add_jobs), to see where their time goes.
      await c.unsafe(`alter system set pg_stat_statements.track = '${opts.nested ? "all" : "top"}'`);
      // Nested: planning too (a function's statements planned again on each call cost more than they run).
      await c.unsafe(`alter system set pg_stat_statements.track_planning = ${opts.nested ? "on" : "off"}`).finally(() => c.end({ timeout: 5 }));
      await embedded.stop();
      embedded = await startEmbeddedPostgres(dir, log);
    }
    const running = embedded;
    return {
      url: running.url,
      localUrl: running.localUrl,
      origin: `embedded, data in ${dir}`,
      dataDir: path.join(dir, "pg"),
      statements: opts.statements,
      stop: async () => {
        await running.stop().catch(() => {});
        await remove();
      },
    };
  } catch (err) {
    await embedded?.stop().catch(() => {});
    await remove();
    throw err;
  }
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/** Creates a fresh database (dropping a leftover of the same name); returns its URL and a drop function. */
export async function createDatabase(serverUrl: string, name: string): Promise<{ url: string; name: string; drop(): Promise<void> }> {
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.unsafe(`create database ${name}`);
  } finally {
    await admin.end({ timeout: 5 });
  }
  return {
    url: withDatabase(serverUrl, name),
    name,
    drop: async () => {
      const a = postgres(serverUrl, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
      await a.end({ timeout: 5 });
    },
  };
}

export async function serverVersion(url: string): Promise<string> {
  const c = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await c<{ server_version: string }[]>`show server_version`;
    return row!.server_version;
  } finally {
    await c.end({ timeout: 5 });
  }
}

export interface PgbenchResult {
  tps: number;
  latencyAvgMs: number;
  transactions: number;
  output: string;
}

const INSERT_SCRIPT = "INSERT INTO bench_insert(data) VALUES ('x');\n";

/**
 * The raw-commit anchor: pgbench's single-row autocommit INSERT (perf notes §4.1 row A), with
 * the broker's connection count, 2 threads, extended protocol (unnamed statements, like
 * drizzle on postgres.js).
 */
export async function runPgbench(url: string, opts: { clients: number; seconds: number; workDir: string }): Promise<PgbenchResult> {
  const c = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await c.unsafe(
      "create table if not exists bench_insert (id bigint generated always as identity primary key, data text not null, created_at timestamptz not null default now())",
    );
  } finally {
    await c.end({ timeout: 5 });
  }
  const script = path.join(opts.workDir, "insert.sql");
  await fs.writeFile(script, INSERT_SCRIPT);

  const u = new URL(url);
  const args = ["-n", "-M", "extended", "-c", String(opts.clients), "-j", "2", "-T", String(opts.seconds), "-f", script];
  args.push("-h", u.hostname, "-p", u.port || "5432", "-U", decodeURIComponent(u.username), decodeURIComponent(u.pathname.slice(1)));
  const env: NodeJS.ProcessEnv = { ...process.env, PGPASSWORD: decodeURIComponent(u.password) };
  const sslmode = u.searchParams.get("sslmode");
  if (sslmode) env.PGSSLMODE = sslmode;

  const pgbench = process.env.PGBENCH ?? "pgbench";
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn(pgbench, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    child.on("error", (err) => reject(new Error(`could not run ${pgbench}: ${err.message} (set PGBENCH to its path)`)));
    child.on("close", (code) => (code === 0 ? resolve(out) : reject(new Error(`pgbench exited with ${code}:\n${out}`))));
  });
  const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(output);
  if (!tps) throw new Error(`could not find tps in pgbench output:\n${output}`);
  const latency = /latency average = ([\d.]+) ms/.exec(output);
  const processed = /number of transactions actually processed: (\d+)/.exec(output);
  return { tps: Number(tps[1]), latencyAvgMs: latency ? Number(latency[1]) : NaN, transactions: processed ? Number(processed[1]) : NaN, output };
}

export async function pgbenchVersion(): Promise<string> {
  const pgbench = process.env.PGBENCH ?? "pgbench";
  return new Promise((resolve) => {
    const child = spawn(pgbench, ["--version"], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.on("error", () => resolve("not found"));
    child.on("close", () => resolve(out.trim()));
  });
}

export interface StatementStats {
  /** Statements the clients sent (top level; functions' inner statements not counted). */
  calls: number;
  top: Array<{ calls: number; totalMs: number; planMs: number; rows: number; blocks: number; walBytes: number; query: string; nested: boolean }>;
  /** Row writes per table since the reset: a non-HOT update writes a new entry into every index of its table. */
  tables: TableCounts[];
}

interface TableCounts {
  table: string;
  inserts: number;
  updates: number;
  hotUpdates: number;
  deletes: number;
}

/** pg_stat_statements for one database: reset, then read what ran since. */
export function statementStats(url: string) {
  const c = postgres(url, { max: 1, onnotice: () => {} });
  const ready = c.unsafe("create extension if not exists pg_stat_statements");
  // Cumulative counters (pg_stat_statements_reset does not reset them): read before and after.
  const tableCounts = async (): Promise<TableCounts[]> => {
    await c.unsafe("select pg_stat_clear_snapshot()");
    const rows = await c.unsafe<{ table: string; ins: string; upd: string; hot: string; del: string }[]>(`
      select schemaname || '.' || relname as table, n_tup_ins as ins, n_tup_upd as upd, n_tup_hot_upd as hot, n_tup_del as del
      from pg_stat_user_tables where schemaname in ('signalbox', 'graphile_worker')`);
    return rows.map((r) => ({ table: r.table, inserts: Number(r.ins), updates: Number(r.upd), hotUpdates: Number(r.hot), deletes: Number(r.del) }));
  };
  let before: TableCounts[] = [];
  return {
    async reset() {
      await ready;
      await c.unsafe("select pg_stat_statements_reset()");
      before = await tableCounts();
    },
    async read(): Promise<StatementStats> {
      await ready;
      const rows = await c.unsafe<{ calls: string; total_ms: number; plan_ms: number; rows: string; blocks: string; wal_bytes: string; query: string; toplevel: boolean }[]>(`
        select calls, total_exec_time as total_ms, total_plan_time as plan_ms, rows, shared_blks_hit + shared_blks_read as blocks, wal_bytes,
          regexp_replace(query, '\\s+', ' ', 'g') as query, toplevel
        from pg_stat_statements
        where dbid = (select oid from pg_database where datname = current_database())
          and query not ilike '%pg_stat_statements%'
        order by total_exec_time + total_plan_time desc`);
      // Table counters reach the shared statistics when a backend is idle for a second at most.
      await new Promise((r) => setTimeout(r, 1_100));
      const after = await tableCounts();
      const tables = after
        .map((a) => {
          const b = before.find((x) => x.table === a.table);
          const less = (k: Exclude<keyof TableCounts, "table">) => a[k] - (b?.[k] ?? 0);
          return { table: a.table, inserts: less("inserts"), updates: less("updates"), hotUpdates: less("hotUpdates"), deletes: less("deletes") };
        })
        .filter((t) => t.inserts + t.updates + t.deletes > 0);
      return {
        tables,
        calls: rows.filter((r) => r.toplevel).reduce((n, r) => n + Number(r.calls), 0),
        top: rows.map((r) => ({
          calls: Number(r.calls),
          totalMs: Number(r.total_ms),
          planMs: Number(r.plan_ms),
          rows: Number(r.rows),
          blocks: Number(r.blocks),
          walBytes: Number(r.wal_bytes),
          query: r.query,
          nested: !r.toplevel,
        })),
      };
    },
    close: () => c.end({ timeout: 5 }),
  };
}
