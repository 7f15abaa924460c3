import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { freePort } from "../../src/core/free-port.ts";
import { API_KEY, CALLBACK_SECRET } from "./test-app.ts";

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
  /** Resolves at the log line "signalbox listening"; rejects if the process exits first. */
  listening: Promise<void>;
  api(p: string, init?: { method?: string; json?: unknown }): Promise<Response>;
}

export const NODE = path.resolve(import.meta.dirname, "../../node_modules/.bin/node");
const ROOT = path.resolve(import.meta.dirname, "../..");
const started: ChildProcess[] = [];

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
  const exited = new Promise<number | string | null>((resolve) => child.once("close", (code, signal) => resolve(signal ?? code)));
  const listening = new Promise<void>((resolve, reject) => {
    const check = () => {
      if (output.includes('"signalbox listening"')) resolve();
      else setTimeout(check, 20);
    };
    check();
    void exited.then((how) => reject(new Error(`signalbox exited (${how}) before listening:\n${output}`)));
  });
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
    api: (p, init = {}) =>
      fetch(baseUrl + p, {
        method: init.method ?? "GET",
        headers: { authorization: `Bearer ${API_KEY}`, ...(init.json !== undefined ? { "content-type": "application/json" } : {}) },
        body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
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

/** Polls until `url` answers 200 (or the process exits, or the time is up). */
export async function until200(svc: ServiceProcess, p: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let gone = false;
  void svc.exited.then(() => (gone = true));
  for (;;) {
    if (gone) throw new Error(`signalbox exited before ${p} answered 200:\n${svc.output()}`);
    const res = await fetch(svc.baseUrl + p).catch(() => undefined);
    if (res?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${p} not 200 within ${timeoutMs} ms (last ${res?.status}):\n${svc.output()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** SIGKILLs every process this helper started that still runs (for afterAll). */
export function killServices(): void {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}
