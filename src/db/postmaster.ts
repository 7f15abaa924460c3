import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Log } from "../core/logger.ts";
import type { RunAs } from "./cluster-placement.ts";
import type { PostgresBinaries } from "./postgres-binaries.ts";

// Postgres's messages in English whatever the machine's locale: readiness is read from them.
const ENV = { ...process.env, LC_MESSAGES: "C", LC_ALL: "C" };
const READY = "database system is ready to accept connections";

export interface Postmaster {
  pid: number;
  stop(): Promise<void>;
  /** Settles (with its exit code or signal) only if it exits without `stop` asking it to. */
  died: Promise<number | string>;
}

interface Cluster {
  binaries: PostgresBinaries;
  databaseDir: string;
  runAs?: RunAs;
  log: Log;
}

/** initdb: a new cluster whose superuser `user` logs in with `password` (password auth). */
export async function initCluster(c: Cluster, user: string, password: string): Promise<void> {
  // The password file must be readable by the cluster's user, and by nobody else.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "signalbox-initdb-"));
  const pwfile = path.join(dir, "pw");
  try {
    fs.writeFileSync(pwfile, password + "\n", { mode: 0o600 });
    if (c.runAs) {
      fs.chownSync(dir, c.runAs.uid, c.runAs.gid);
      fs.chownSync(pwfile, c.runAs.uid, c.runAs.gid);
    }
    const args = [`--pgdata=${c.databaseDir}`, "--auth=password", `--username=${user}`, `--pwfile=${pwfile}`, "--encoding=UTF8", "--locale=C", "--lc-messages=C"];
    const child = spawnAs(c, c.binaries.initdb, args);
    let output = "";
    child.stdout!.on("data", (d: Buffer) => (output += d.toString("utf8")));
    child.stderr!.on("data", (d: Buffer) => (output += d.toString("utf8")));
    const code = await exitOf(child);
    c.log.trace({ initdb: output }, "initdb");
    if (code !== 0) throw new Error(`initdb failed for ${c.databaseDir}: ${lastError(output) ?? `exit ${code}`}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Starts the postmaster and resolves once it accepts connections. It gets a process group of
 * its own, so a Ctrl-C in the terminal reaches signalbox only: signalbox drains its jobs, then
 * stops Postgres. Should signalbox exit without stopping it, the exit hook asks it to stop.
 */
export async function startPostmaster(c: Cluster, port: number, settings: string[]): Promise<Postmaster> {
  const args = ["-D", c.databaseDir, "-p", String(port), ...settings.flatMap((s) => ["-c", s])];
  const child = spawnAs(c, c.binaries.postgres, args, true);
  const exited = exitOf(child);
  // It has a process group of its own: should signalbox exit, even before Postgres is ready (a
  // second Ctrl-C during a slow first start), it is asked to stop.
  const stopAtExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT");
  };
  process.on("exit", stopAtExit);
  void exited.then(
    (code) => c.log.debug({ code }, "embedded postgres exited"),
    () => {},
  ).finally(() => process.off("exit", stopAtExit));
  let tail = "";
  await new Promise<void>((resolve, reject) => {
    let buffered = "";
    child.stderr!.on("data", (d: Buffer) => {
      buffered += d.toString("utf8");
      const lines = buffered.split("\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        c.log.trace({ postgres: line }, "embedded postgres");
        tail = (tail + "\n" + line).slice(-4000);
        if (line.includes(READY)) resolve();
      }
    });
    exited.then((code) => reject(new Error(`the embedded Postgres (${c.databaseDir}) stopped at start: ${lastError(tail) ?? `exit ${code}`}`)), reject);
  });
  let stopAsked = false;
  return {
    pid: child.pid!,
    died: exited.then((code) => (stopAsked ? new Promise<never>(() => {}) : code)),
    async stop() {
      stopAsked = true;
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGINT"); // fast shutdown: rolls back open transactions, keeps everything committed
      if (!(await settlesWithin(exited, 30_000))) {
        child.kill("SIGQUIT"); // immediate shutdown: crash recovery at the next start
        await exited;
      }
    },
  };
}

/**
 * A postmaster left running by a signalbox process that died (SIGKILL, OOM) still holds the
 * cluster: stop it. Only called by the holder of the data dir lock, so it is never the
 * postmaster of a live signalbox; and only a process that is this cluster's postmaster (a pid
 * in a stale postmaster.pid may since belong to anything) gets a signal.
 */
export async function stopOrphanedPostmaster(databaseDir: string, log: Log): Promise<void> {
  let text: string;
  try {
    text = fs.readFileSync(path.join(databaseDir, "postmaster.pid"), "utf8");
  } catch {
    return; // no postmaster.pid: no postmaster
  }
  const pid = Number.parseInt(text.split("\n")[0] ?? "", 10);
  if (!Number.isInteger(pid) || pid <= 0 || !isPostmasterOf(pid, databaseDir)) return;
  log.warn({ pid, dataDir: databaseDir }, "stopping the embedded Postgres left running by a signalbox process that died");
  for (const [signal, ms] of [["SIGINT", 30_000], ["SIGQUIT", 5_000], ["SIGKILL", 5_000]] as const) {
    if (!alive(pid)) return;
    process.kill(pid, signal);
    for (const until = Date.now() + ms; alive(pid) && Date.now() < until; ) await new Promise((r) => setTimeout(r, 50));
  }
  if (alive(pid)) throw new Error(`the embedded Postgres left running (pid ${pid}) does not stop: stop it, then start signalbox again`);
}

/** The postmaster chdirs into its data dir: its cwd (Linux) or command line says which cluster it runs. */
function isPostmasterOf(pid: number, databaseDir: string): boolean {
  try {
    if (process.platform === "linux") return fs.realpathSync(`/proc/${pid}/cwd`) === fs.realpathSync(databaseDir);
    const command = execFileSync("ps", ["-o", "command=", "-p", String(pid)], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    return command.includes("postgres") && command.includes(databaseDir);
  } catch {
    return false;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

function spawnAs(c: Cluster, file: string, args: string[], ownGroup = false): ChildProcess {
  const child = spawn(file, args, {
    env: ENV,
    cwd: "/", // the cluster's user may not be allowed into ours
    stdio: ["ignore", "pipe", "pipe"],
    detached: ownGroup,
    ...(c.runAs ? { uid: c.runAs.uid, gid: c.runAs.gid } : {}),
  });
  return child;
}

/** Resolves with the exit code (or signal); a spawn failure (EACCES, ENOENT) rejects with a clear message. */
function exitOf(child: ChildProcess): Promise<number | string> {
  return new Promise((resolve, reject) => {
    child.once("error", (err: NodeJS.ErrnoException) => reject(new Error(`cannot run ${err.path ?? "Postgres"}: ${err.code ?? err.message}`)));
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown"));
  });
}

function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(() => true, () => true),
    new Promise<boolean>((r) => (timer = setTimeout(() => r(false), ms))),
  ]).finally(() => clearTimeout(timer));
}

/** The most telling line of Postgres output: its last FATAL/ERROR/PANIC, else its last line. */
function lastError(output: string): string | undefined {
  const lines = output.split("\n").map((l) => l.trim()).filter(Boolean);
  const bad = lines.filter((l) => /\b(FATAL|PANIC|ERROR)\b|^initdb: error/.test(l));
  return (bad.at(-1) ?? lines.at(-1))?.replace(/^.*?\b(FATAL|PANIC|ERROR):\s+/, "");
}
