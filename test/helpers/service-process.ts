import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { freePort } from "../../src/core/free-port.ts";
import { API_KEY, CALLBACK_SECRET } from "./test-app.ts";
import { waitFor } from "./wait-for.ts";

/** `node src/main.ts` (Node 24 from node_modules, as `npm start` runs it) as a child process. */
export interface ServiceProcess {
  child: ChildProcess;
  pid: number;
  port: number;
  baseUrl: string;
  /** Settles with the exit code, or the signal that ended it. */
  exited: Promise<number | string | null>;
  output(): string;
  /** The JSON log lines printed so far. */
  logs(): Array<Record<string, unknown>>;
  /** Resolves at the log line "signalbox listening" (LOG_LEVEL info or lower); rejects if the process exits first. */
  listening: Promise<void>;
  /** Still running (it has not exited). */
  alive(): boolean;
  /** fetch with the management key; a request still unanswered after `timeoutMs` (default 30 s, above any wait_s a test holds) is aborted. */
  api(p: string, init?: { method?: string; json?: unknown; timeoutMs?: number }): Promise<Response>;
}

export const NODE = path.resolve(import.meta.dirname, "../../node_modules/.bin/node");
const ROOT = path.resolve(import.meta.dirname, "../..");
const started: ChildProcess[] = [];

/**
 * The environment of a test's signalbox process on an existing database (spawnService adds the
 * test keys): jobs are looked for every 100 ms, a killed process's jobs are released after a
 * second, and a failed delivery is retried after 0.1 s, so tests of crashes and faults see
 * recovery quickly. `env` overrides any of it.
 */
export function onDatabase(databaseUrl: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    SIGNALBOX_POLL_INTERVAL_MS: "100",
    SIGNALBOX_WORKER_STALE_S: "1",
    SIGNALBOX_DELIVERY_BACKOFF_S: "0.1",
    ...env,
  };
}

/**
 * Spawns signalbox with only the environment given (plus PATH and test keys). Does not wait:
 * await `listening`, or `exited` for a start that must fail.
 */
export async function spawnService(env: Record<string, string | undefined>, port?: number): Promise<ServiceProcess> {
  port ??= await freePort();
  const child = spawn(NODE, ["src/main.ts"], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH,
      PORT: String(port),
      SIGNALBOX_API_KEYS: API_KEY,
      SIGNALBOX_CALLBACK_SECRET: CALLBACK_SECRET,
      LOG_LEVEL: "info",
      ...env,
    },
  });
  started.push(child);
  let output = "";
  child.stdout!.on("data", (d: Buffer) => (output += d.toString("utf8")));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString("utf8")));
  let gone = false;
  const exited = new Promise<number | string | null>((resolve) => child.once("close", (code, signal) => ((gone = true), resolve(signal ?? code))));
  const listening = waitFor("the log line \"signalbox listening\"", () => output.includes('"signalbox listening"'), {
    timeoutMs: 60_000,
    gaveUp: () => (gone ? "signalbox exited first" : undefined),
    context: () => output,
  }).then(() => {});
  listening.catch(() => {});
  const baseUrl = `http://127.0.0.1:${port}`;
  return {
    child,
    pid: child.pid!,
    port,
    baseUrl,
    exited,
    output: () => output,
    logs: () =>
      output
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    listening,
    alive: () => !gone,
    api: (p, init = {}) =>
      fetch(baseUrl + p, {
        method: init.method ?? "GET",
        headers: { authorization: `Bearer ${API_KEY}`, ...(init.json !== undefined ? { "content-type": "application/json" } : {}) },
        body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
        signal: AbortSignal.timeout(init.timeoutMs ?? 30_000),
      }),
  };
}

/** Spawns and waits until it listens; retries on the rare port taken between probe and listen. */
export async function startService(env: Record<string, string | undefined>): Promise<ServiceProcess> {
  for (let attempt = 1; ; attempt++) {
    const svc = await spawnService(env);
    try {
      await svc.listening;
      return svc;
    } catch (err) {
      if (attempt >= 3 || !svc.output().includes("in use")) throw err;
    }
  }
}

/** Resolves once `p` answers 200 (default /readyz); fails at once if the process exits first. */
export async function answers200(svc: ServiceProcess, p = "/readyz", timeoutMs = 30_000): Promise<void> {
  await waitFor(`${p} to answer 200`, async () => (await fetch(svc.baseUrl + p).catch(() => undefined))?.status, {
    until: (status) => status === 200,
    timeoutMs,
    gaveUp: () => (svc.alive() ? undefined : "signalbox exited first"),
    context: () => svc.output(),
  });
}

/** Whether a process with this pid runs (a signal 0 reaches it). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGKILLs every process this helper started that still runs (for afterAll). */
export function killServices(): void {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}
