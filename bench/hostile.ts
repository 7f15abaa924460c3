/**
 * `npm run bench -- --hostile`: what anonymous attackers cost everyone else (the hostile-clients
 * issue). signalbox runs with its default limits, behind a "proxy" (SIGNALBOX_TRUSTED_PROXIES =
 * loopback) so that each attacker request may claim an address of its own in X-Forwarded-For: an
 * attacker with many addresses, the hard case for per-address limits. The attackers are child
 * processes (bench/hostile-clients.ts); a legitimate sender (one address of its own, 50 signals/s,
 * each resolving an open wait) is measured in this process:
 *
 *  1. intake p99 quiet, then under a flood of anonymous intake (rejections on an `auth: none`
 *     type, unknown names, bad signatures; 2 processes x 64 connections, closed loop) from one
 *     address, then with every request from another address; target under 2x quiet;
 *  2. intake p99 while 8 clients post 100,000-field forms to forged approval links, target < 50 ms;
 *  3. the service's heap (after a full collection, through the inspector) before and after
 *     300,000 random unknown signal names, target growth < 20 MiB;
 *  4. 20,000 slow clients (headers or body trickled, from 40 addresses, 3 processes; twice the
 *     connection cap, each address within its share): /healthz,
 *     /readyz and an authenticated call keep answering (p99, failures);
 *  5. 6 s of 1 MB payloads rejected (no wait): database growth, target < 20 MB.
 *
 * Knobs: BENCH_HOSTILE_PHASE_S (10), BENCH_HOSTILE_FLOODERS (2 processes), BENCH_HOSTILE_SLOW
 * (20000), BENCH_HOSTILE_NAMES (300000), BENCH_HOSTILE_NAMES_MAX_S (120: the names phase ends
 * there, sent or not).
 */
import { spawn } from "node:child_process";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { freePort } from "../src/core/free-port.ts";
import type { Attack } from "./hostile-clients.ts";
import { rawHttpClient } from "./http-client.ts";
import { openLoop, type LoadResult } from "./load.ts";
import type { Service } from "./service.ts";
import { fmtMs, fmtRate, now, summarize, table, type Summary } from "./stats.ts";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const env = process.env;
const PHASE_MS = Number(env.BENCH_HOSTILE_PHASE_S ?? 10) * 1000;
const FLOODERS = Number(env.BENCH_HOSTILE_FLOODERS ?? 2);
const SLOW = Number(env.BENCH_HOSTILE_SLOW ?? 20_000);
const NAMES = Number(env.BENCH_HOSTILE_NAMES ?? 300_000);
/**
 * The names phase stops here even if not all were sent: made-up names share one type's budget and,
 * past a tenth of it, are answered as late 429s (a few hundred a second from the clients here).
 */
const NAMES_MAX_MS = Number(env.BENCH_HOSTILE_NAMES_MAX_S ?? 120) * 1000;
const LEGIT_RATE = 50;
/** 40 addresses, 500 slow clients each at the default: within each address's share (1,000), twice the total cap (10,000). */
const SLOW_ADDRESSES = Array.from({ length: 40 }, (_, i) => `127.0.2.${i + 1}`);
const LEGIT = "legit";
const OPEN = "open";
const SIGNED = "signed";
/** The legitimate sender's address (X-Forwarded-For): a share of the per-address limit of its own. */
const LEGIT_ADDRESS = "192.0.2.1";
const TARGETS = { floodP99Ratio: 2, formsP99Ms: 50, heapMiB: 20, diskMB: 20 };

export interface HostileBenchOptions {
  url: string;
  dataDir: string;
  log(msg: string): void;
  /** Starts signalbox with these variables on top of the bench's, and these Node flags. */
  startBroker(env: Record<string, string>, nodeFlags: string[]): Promise<Service>;
  api<T = unknown>(service: Service): (method: string, path: string, body?: unknown) => Promise<{ status: number; body: T }>;
  token: string;
}

interface AttackReport {
  sent: number;
  byStatus: Record<string, number>;
  errors: number;
  opened?: number;
  closedByServer?: number;
  heldMax?: number;
}

export interface HostileBenchResult {
  quiet: LoadResult;
  floodOne: { legit: LoadResult; report: AttackReport };
  floodMany: { legit: LoadResult; report: AttackReport };
  forms: { legit: LoadResult; report: AttackReport };
  slowReport: AttackReport;
  listenOverflowsDuring: number;
  probes: Record<"healthz" | "readyz" | "management", LoadResult>;
  heapBeforeMiB: number;
  heapAfterMiB: number;
  namesReport: AttackReport;
  namesSeconds: number;
  diskBeforeMB: number;
  diskAfterMB: number;
  dataDirGrowthMB: number;
  diskReport: AttackReport;
}

/** Runs attackers in `processes` child processes at once; resolves with their reports summed. */
async function attack(processes: Attack[]): Promise<AttackReport> {
  const reports = await Promise.all(
    processes.map(
      (a) =>
        new Promise<AttackReport>((resolve, reject) => {
          const child = spawn(process.execPath, [path.join(HERE, "hostile-clients.ts"), JSON.stringify(a)], { stdio: ["ignore", "pipe", "inherit"] });
          let out = "";
          child.stdout.on("data", (d) => (out += d));
          child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out) as AttackReport) : reject(new Error(`${a.kind} attacker exited ${code}`))));
        }),
    ),
  );
  const sum: AttackReport = { sent: 0, byStatus: {}, errors: 0 };
  for (const r of reports) {
    sum.sent += r.sent;
    sum.errors += r.errors;
    for (const [k, v] of Object.entries(r.byStatus)) sum.byStatus[k] = (sum.byStatus[k] ?? 0) + v;
    for (const k of ["opened", "closedByServer", "heldMax"] as const) if (r[k] !== undefined) sum[k] = (sum[k] ?? 0) + r[k];
  }
  return sum;
}

/** The service's heap after a full collection, in MiB, asked through its inspector. */
async function heapAfterGcMiB(inspectorPort: number): Promise<number> {
  const [target] = (await (await fetch(`http://127.0.0.1:${inspectorPort}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>;
  const ws = new WebSocket(target!.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = reject;
  });
  let id = 0;
  const call = (method: string, params: unknown = {}) =>
    new Promise<{ result?: { result?: { value?: unknown } } }>((resolve) => {
      const mine = ++id;
      ws.addEventListener("message", function onMessage(e) {
        const msg = JSON.parse(String(e.data)) as { id?: number };
        if (msg.id !== mine) return;
        ws.removeEventListener("message", onMessage);
        resolve(msg as never);
      });
      ws.send(JSON.stringify({ id: mine, method, params }));
    });
  try {
    await call("HeapProfiler.collectGarbage");
    await call("HeapProfiler.collectGarbage");
    const r = await call("Runtime.evaluate", { expression: "process.memoryUsage().heapUsed", returnByValue: true });
    return Number(r.result?.result?.value) / 2 ** 20;
  } finally {
    ws.close();
  }
}

/** Connections the kernel dropped because a listen queue was full (the client retries its SYN after 1 s, then 3 s): this machine's, all ports. */
function listenOverflows(): number {
  const lines = readFileSync("/proc/net/netstat", "utf8").split("\n");
  const names = lines.find((l) => l.startsWith("TcpExt:"))!.split(" ");
  const values = lines.filter((l) => l.startsWith("TcpExt:"))[1]!.split(" ");
  return Number(values[names.indexOf("ListenOverflows")]);
}

const duMB = (dir: string) => Number(execFileSync("du", ["-sk", dir]).toString().split("\t")[0]) / 1024;

export async function hostileBench(o: HostileBenchOptions): Promise<HostileBenchResult> {
  const inspectorPort = await freePort();
  // Default limits, but X-Forwarded-For believed from loopback: each attacker request may be "another address".
  const service = await o.startBroker(
    { SIGNALBOX_RATE_LIMIT_PER_ADDRESS: "100", SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: "1000", SIGNALBOX_TRUSTED_PROXIES: "127.0.0.1" },
    [`--inspect=127.0.0.1:${inspectorPort}`],
  );
  const api = o.api(service);
  const base = service.baseUrl;
  for (const [name, auth] of [
    [LEGIT, { scheme: "none" }],
    [OPEN, { scheme: "none" }],
    [SIGNED, { scheme: "github", secrets: ["bench-github-secret-0123456789abcdef"], run_pointer: "/run" }],
  ] as const) {
    const r = await api("PUT", `/signal-types/${name}`, { description: "hostile bench", schema: null, auth });
    if (r.status !== 200 && r.status !== 201) throw new Error(`declaring ${name}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
  }

  // The legitimate sender: each signal resolves a wait opened for it beforehand.
  const legitCount = Math.round((LEGIT_RATE * PHASE_MS) / 1000);
  let legitRuns = 0;
  const openLegitWaits = async (n: number) => {
    const first = legitRuns;
    legitRuns += n;
    for (let i = first; i < first + n; i += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, first + n - i) }, async (_, k) => {
          const r = await api("POST", `/runs/legit-${i + k}/waits`, { signal: LEGIT, timeout_s: 3600 });
          if (r.status !== 201) throw new Error(`open wait: HTTP ${r.status}`);
        }),
      );
    }
    return first;
  };
  const legitClient = rawHttpClient(base, {});
  const legitSender = async (first: number) =>
    openLoop({
      ratePerS: LEGIT_RATE,
      count: legitCount,
      op: async (i) => {
        const r = await legitClient("POST", `/signals/legit-${first + i}/${LEGIT}`, JSON.stringify({ i }), { "x-forwarded-for": LEGIT_ADDRESS });
        if (r.status !== 202) throw new Error(`legit signal: HTTP ${r.status} ${r.body.slice(0, 120)}`);
      },
    });

  // Warm-up (JIT, pools), then 1: quiet, then the flood.
  await legitSender(await openLegitWaits(legitCount));
  o.log(`hostile: legitimate sender alone, ${LEGIT_RATE}/s for ${PHASE_MS / 1000} s`);
  const quiet = await legitSender(await openLegitWaits(legitCount));
  /** The legitimate sender's figures while `attackers` run (started a second before it). */
  const during = async (attackers: Attack[]) => {
    const first = await openLegitWaits(legitCount);
    const attacking = attack(attackers);
    await new Promise((r) => setTimeout(r, 1000));
    const legit = await legitSender(first);
    return { legit, report: await attacking };
  };
  const flooders = (addresses: "one" | "many") =>
    Array.from({ length: FLOODERS }, () => ({ kind: "flood", baseUrl: base, concurrency: 64, durationMs: PHASE_MS + 2000, openType: OPEN, signedType: SIGNED, addresses }) as const);
  o.log(`hostile: the same under an anonymous flood from one address (${FLOODERS} processes x 64 connections)`);
  const floodOne = await during(flooders("one"));
  o.log(`hostile: the same under an anonymous flood, each request from another address`);
  const floodMany = await during(flooders("many"));

  // 2: 100,000-field forms to forged approval links.
  o.log("hostile: the same while 8 clients post 100,000-field forms to forged approval links");
  const forms = await during([{ kind: "forms", baseUrl: base, concurrency: 8, durationMs: PHASE_MS + 2000 }]);

  // 3: unknown names (before the slow clients, whose sockets the heap holds for a while after), heap after a full collection before and after.
  const heapBeforeMiB = await heapAfterGcMiB(inspectorPort);
  o.log(`hostile: ${NAMES} random unknown signal names (heap before ${heapBeforeMiB.toFixed(1)} MiB)`);
  const namesStarted = now();
  const namesReport = await attack(
    Array.from({ length: FLOODERS }, () => ({ kind: "names", baseUrl: base, concurrency: 64, count: Math.ceil(NAMES / FLOODERS), durationMs: NAMES_MAX_MS }) as const),
  );
  const namesSeconds = (now() - namesStarted) / 1000;
  const heapAfterMiB = await heapAfterGcMiB(inspectorPort);

  // 4: slow clients; the probes and a management call from loopback meanwhile.
  o.log(`hostile: ${SLOW} slow clients from ${SLOW_ADDRESSES.length} addresses (3 processes); probes at 20/s each`);
  const perProcess = Math.ceil(SLOW / 3);
  const slowAttack = attack(
    [0, 1, 2].map((p) => ({ kind: "slow", baseUrl: base, count: Math.min(perProcess, SLOW - p * perProcess), localAddresses: SLOW_ADDRESSES, durationMs: 2 * PHASE_MS + 10_000 }) as const),
  );
  await new Promise((r) => setTimeout(r, 10_000)); // all connected (or refused) first
  const overflowsBefore = listenOverflows();
  const probe = (pathname: string, headers: Record<string, string>) => {
    const send = rawHttpClient(base, headers);
    return openLoop({
      ratePerS: 20,
      count: (20 * 2 * PHASE_MS) / 1000,
      op: async () => {
        const r = await send("GET", pathname);
        if (r.status !== 200) throw new Error(`${pathname}: HTTP ${r.status}`);
      },
    });
  };
  const [healthz, readyz, management] = await Promise.all([probe("/healthz", {}), probe("/readyz", {}), probe("/signal-types", { authorization: `Bearer ${o.token}` })]);
  const listenOverflowsDuring = listenOverflows() - overflowsBefore;
  const slowReport = await slowAttack;

  // 5: the disk flood.
  const sql = postgres(o.url, { max: 1, onnotice: () => {} });
  try {
    const size = async () => Number((await sql`select pg_database_size(current_database()) as b`)[0]!.b) / 1e6;
    await sql`checkpoint`.catch(() => {}); // superuser only (the embedded server's user is)
    const diskBeforeMB = await size();
    const dirBefore = duMB(o.dataDir);
    o.log(`hostile: 6 s of 1 MB payloads to runs with no wait (database ${diskBeforeMB.toFixed(1)} MB)`);
    const diskReport = await attack([{ kind: "disk", baseUrl: base, concurrency: 8, durationMs: 6000, openType: OPEN }]);
    await sql`checkpoint`.catch(() => {}); // superuser only (the embedded server's user is)
    const diskAfterMB = await size();
    const dataDirGrowthMB = duMB(o.dataDir) - dirBefore;
    return {
      quiet,
      floodOne,
      floodMany,
      forms,
      slowReport,
      listenOverflowsDuring,
      probes: { healthz, readyz, management },
      heapBeforeMiB,
      heapAfterMiB,
      namesReport,
      namesSeconds,
      diskBeforeMB,
      diskAfterMB,
      dataDirGrowthMB,
      diskReport,
    };
  } finally {
    await sql.end();
  }
}

const statuses = (r: AttackReport) =>
  Object.entries(r.byStatus)
    .sort((a, b) => b[1] - a[1])
    .map(([s, n]) => `${s}: ${n}`)
    .join(", ") + (r.errors ? `, errors: ${r.errors}` : "");
const lat = (s: Summary) => `p50 ${fmtMs(s.p50)} / p99 ${fmtMs(s.p99)} / max ${fmtMs(s.max)} (n=${s.count})`;
const failedOf = (r: LoadResult) => (r.failed ? `, ${r.failed} failed: ${[...r.errors.keys()].slice(0, 2).join("; ")}` : "");

/** Prints the figures and targets; returns whether every target was met. */
export function printHostile(r: HostileBenchResult, pgbenchTps: number, phaseS = PHASE_MS / 1000): boolean {
  const quiet = summarize(r.quiet.latenciesMs);
  const floodOne = summarize(r.floodOne.legit.latenciesMs);
  const floodMany = summarize(r.floodMany.legit.latenciesMs);
  const forms = summarize(r.forms.legit.latenciesMs);
  const oneRatio = floodOne.p99 / quiet.p99;
  const manyRatio = floodMany.p99 / quiet.p99;
  const heapGrowth = r.heapAfterMiB - r.heapBeforeMiB;
  const diskGrowth = r.diskAfterMB - r.diskBeforeMB;
  const probesOk = Object.values(r.probes).every((p) => p.failed === 0);
  const pass = (ok: boolean) => (ok ? "PASS" : "FAIL");
  const rate = (a: AttackReport) => fmtRate(a.sent / (phaseS + 2));
  const rows: string[][] = [
    ["pgbench single-row INSERT", `${fmtRate(pgbenchTps)} tps`, "", ""],
    [`legitimate intake @ ${LEGIT_RATE}/s, quiet`, lat(quiet) + failedOf(r.quiet), "", ""],
    [`  under an anonymous flood from one address`, lat(floodOne) + failedOf(r.floodOne.legit), "", ""],
    [`  p99 / quiet p99`, `${oneRatio.toFixed(2)}x`, `< ${TARGETS.floodP99Ratio}x`, pass(oneRatio < TARGETS.floodP99Ratio && r.floodOne.legit.failed === 0)],
    [`  the flood (${FLOODERS} processes, ${rate(r.floodOne.report)}/s)`, statuses(r.floodOne.report), "", ""],
    [`  under a flood from a new address each request`, lat(floodMany) + failedOf(r.floodMany.legit), "", ""],
    [`  p99 / quiet p99`, `${manyRatio.toFixed(2)}x`, `< ${TARGETS.floodP99Ratio}x`, pass(manyRatio < TARGETS.floodP99Ratio && r.floodMany.legit.failed === 0)],
    [`  the flood (${FLOODERS} processes, ${rate(r.floodMany.report)}/s)`, statuses(r.floodMany.report), "", ""],
    [`legitimate intake, 8 clients posting 100,000-field forms`, lat(forms) + failedOf(r.forms.legit), `p99 < ${TARGETS.formsP99Ms} ms`, pass(forms.p99 < TARGETS.formsP99Ms && r.forms.legit.failed === 0)],
    [`  the forms (${rate(r.forms.report)}/s)`, statuses(r.forms.report), "", ""],
    [`${SLOW} slow clients`, `${r.slowReport.opened} connections opened, ${r.slowReport.closedByServer} closed by the server, at most ${r.slowReport.heldMax} open at once (client side); ${r.listenOverflowsDuring} SYNs dropped by the kernel while probing (listen queue full)`, "", ""],
    ...(["healthz", "readyz", "management"] as const).map((k) => [
      `  ${k === "management" ? "GET /signal-types (management token)" : `/${k}`} @ 20/s meanwhile`,
      lat(summarize(r.probes[k].latenciesMs)) + failedOf(r.probes[k]),
      "all answer",
      pass(r.probes[k].failed === 0),
    ]),
    [
      `${r.namesReport.sent} random unknown names (${fmtRate(r.namesReport.sent / r.namesSeconds)}/s)`,
      `heap ${r.heapBeforeMiB.toFixed(1)} -> ${r.heapAfterMiB.toFixed(1)} MiB (+${heapGrowth.toFixed(1)}); ${statuses(r.namesReport)}`,
      `< ${TARGETS.heapMiB} MiB`,
      pass(heapGrowth < TARGETS.heapMiB),
    ],
    [
      `6 s of 1 MB rejected payloads (${fmtRate(r.diskReport.sent / 6)}/s)`,
      `database ${r.diskBeforeMB.toFixed(1)} -> ${r.diskAfterMB.toFixed(1)} MB (+${diskGrowth.toFixed(1)}); data dir +${r.dataDirGrowthMB.toFixed(1)} MB (WAL included); ${statuses(r.diskReport)}`,
      `< ${TARGETS.diskMB} MB`,
      pass(diskGrowth < TARGETS.diskMB),
    ],
  ];
  console.log("\n== hostile clients ==");
  console.log(table(["metric", "value", "target", "result"], rows));
  return oneRatio < TARGETS.floodP99Ratio && manyRatio < TARGETS.floodP99Ratio && forms.p99 < TARGETS.formsP99Ms && probesOk && heapGrowth < TARGETS.heapMiB && diskGrowth < TARGETS.diskMB;
}
