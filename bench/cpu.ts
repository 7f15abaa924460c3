import fs from "node:fs";

/**
 * Where the CPU went during a phase (Linux /proc only; elsewhere every figure is NaN): the
 * whole machine, the signalbox process, the Postgres server (postmaster and its children,
 * exited ones included via the postmaster's reaped-children time) and this process. What is
 * left of the machine's busy time is "other": anything else running on the box, which makes
 * the figures pessimistic.
 */
export interface CpuSnapshot {
  machineBusyS: number;
  machineTotalS: number;
  serviceS: number;
  postgresS: number;
  benchS: number;
}

const HZ = 100; // USER_HZ: /proc reports clock ticks of 1/100 s on Linux

function readStat(pid: number): { ppid: number; own: number; children: number } | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { ppid: Number(f[1]), own: (Number(f[11]) + Number(f[12])) / HZ, children: (Number(f[13]) + Number(f[14])) / HZ };
  } catch {
    return undefined;
  }
}

function machine(): { busy: number; total: number } {
  try {
    const line = fs.readFileSync("/proc/stat", "utf8").split("\n")[0]!;
    const v = line.trim().split(/\s+/).slice(1, 9).map(Number);
    const total = v.reduce((a, b) => a + b, 0);
    const idle = v[3]! + v[4]!;
    return { busy: (total - idle) / HZ, total: total / HZ };
  } catch {
    return { busy: NaN, total: NaN };
  }
}

function postgresCpu(postmasterPid: number | undefined): number {
  if (postmasterPid === undefined) return NaN;
  const master = readStat(postmasterPid);
  if (!master) return NaN;
  let sum = master.own + master.children;
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const s = readStat(Number(entry));
    if (s && s.ppid === postmasterPid) sum += s.own;
  }
  return sum;
}

export function cpuSnapshot(pids: { service?: number; postmaster?: number }): CpuSnapshot {
  const m = machine();
  const bench = process.cpuUsage();
  return {
    machineBusyS: m.busy,
    machineTotalS: m.total,
    serviceS: pids.service === undefined ? NaN : (readStat(pids.service)?.own ?? NaN),
    postgresS: postgresCpu(pids.postmaster),
    benchS: (bench.user + bench.system) / 1e6,
  };
}

export interface CpuUse {
  /** Busy share of all cores, 0..1. */
  machineBusy: number;
  /** Busy share of all cores taken by processes other than these three, 0..1. */
  other: number;
  serviceS: number;
  postgresS: number;
  benchS: number;
}

export function cpuBetween(a: CpuSnapshot, b: CpuSnapshot): CpuUse {
  const total = b.machineTotalS - a.machineTotalS;
  const busy = b.machineBusyS - a.machineBusyS;
  const serviceS = b.serviceS - a.serviceS;
  const postgresS = b.postgresS - a.postgresS;
  const benchS = b.benchS - a.benchS;
  const known = [serviceS, postgresS, benchS].filter((x) => !Number.isNaN(x)).reduce((x, y) => x + y, 0);
  return { machineBusy: busy / total, other: Math.max(0, busy - known) / total, serviceS, postgresS, benchS };
}

/** The postmaster's pid from its data dir, when we run the server ourselves. */
export function postmasterPid(dataDir: string | undefined): number | undefined {
  if (!dataDir) return undefined;
  try {
    const pid = Number.parseInt(fs.readFileSync(`${dataDir}/postmaster.pid`, "utf8").split("\n")[0] ?? "", 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Waits (up to `maxMs`) until the machine has been under `threshold` busy for a `windowMs`
 * window: a latency phase then starts from a quiet machine, not amid the housekeeping
 * (autovacuum, the last phase's callbacks) that a burst of work leaves behind. Returns how
 * long it waited and how busy the last window was.
 */
export async function settle(opts: { threshold?: number; windowMs?: number; maxMs?: number } = {}): Promise<{ waitedMs: number; busy: number }> {
  const { threshold = 0.15, windowMs = 500, maxMs = 15_000 } = opts;
  const started = Date.now();
  for (;;) {
    const before = cpuSnapshot({});
    await new Promise((r) => setTimeout(r, windowMs));
    const busy = cpuBetween(before, cpuSnapshot({})).machineBusy;
    if (!(busy >= threshold) || Date.now() - started >= maxMs) return { waitedMs: Date.now() - started, busy };
  }
}
