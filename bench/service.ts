import { spawn, type ChildProcess } from "node:child_process";
import { appendFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../src/core/free-port.ts";
import { isInspectorLine } from "./heap.ts";
import { rawHttpClient } from "./http-client.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const MAX_ECHOED_LINES = 40;

export interface Service {
  baseUrl: string;
  pid: number;
  /** Output lines the service wrote (at LOG_LEVEL=warn: warnings and errors only). */
  lines: string[];
  /** Rejects if the process exits before stop() is called. */
  exited: Promise<never>;
  stop(): Promise<void>;
}

/**
 * signalbox as its own process (`node src/main.ts`), so the load generator does not share its
 * event loop. Migrations run at start; resolves once /readyz answers 200.
 */
export async function startService(env: Record<string, string>, nodeFlags: string[] = []): Promise<Service> {
  const port = await freePort();
  // BENCH_NODE_FLAGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof": Node refuses some flags in NODE_OPTIONS.
  const flags = [...(process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter(Boolean), ...nodeFlags];
  const child: ChildProcess = spawn(process.execPath, [...flags, "src/main.ts"], {
    cwd: ROOT,
    // One load generator stands for many senders: the rate limits stay on (their cost is
    // measured) but far above what it sends.
    env: { ...process.env, SIGNALBOX_RATE_LIMIT_PER_ADDRESS: "1000000", SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: "1000000", ...env, PORT: String(port) },
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group: a Ctrl-C in the terminal reaches the bench, which stops it in order.
    detached: true,
  });
  const lines: string[] = [];
  let suppressed = 0;
  // BENCH_SERVICE_LOG=file: all of the service's output, with the bench's clock (e.g. with --trace-gc).
  const logFile = process.env.BENCH_SERVICE_LOG;
  const onData = (d: Buffer) => {
    if (logFile) appendFileSync(logFile, d.toString("utf8").replace(/^(?=.)/gm, `${(performance.now() / 1000).toFixed(3)} `));
    for (const line of d.toString("utf8").split("\n")) {
      if (!line.trim()) continue;
      lines.push(line);
      if (isInspectorLine(line)) continue; // bench/heap.ts reads its address from `lines`
      if (lines.length <= MAX_ECHOED_LINES) process.stderr.write(`  [signalbox] ${line}\n`);
      else if (++suppressed === 1) process.stderr.write(`  [signalbox] (further output suppressed; see the count at the end)\n`);
    }
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);

  let stopping = false;
  const closed = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const exited = closed.then((code): Promise<never> => {
    if (stopping) return new Promise<never>(() => {});
    throw new Error(`signalbox exited unexpectedly (code ${code})${lines.length ? `:\n${lines.slice(-20).join("\n")}` : ""}`);
  });
  exited.catch(() => {}); // observed by whoever races it; never an unhandled rejection

  const stop = async () => {
    if (stopping || child.exitCode !== null || child.signalCode !== null) return;
    stopping = true;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 12_000);
    await closed;
    clearTimeout(timer);
  };

  const baseUrl = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) await exited;
    try {
      const res = await fetch(`${baseUrl}/readyz`);
      await res.body?.cancel();
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`signalbox did not become ready within 90 s:\n${lines.slice(-20).join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return { baseUrl, pid: child.pid!, lines, exited, stop };
}


/** A minimal JSON client for the management API and intake (raw keep-alive sockets; see http-client.ts). */
export function apiClient(baseUrl: string, token: string) {
  const send = rawHttpClient(baseUrl, { authorization: `Bearer ${token}` });
  return async function request<T = unknown>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const res = await send(method, path, body === undefined ? undefined : JSON.stringify(body));
    let parsed: unknown = res.body;
    try {
      parsed = res.body ? JSON.parse(res.body) : null;
    } catch {
      // keep the text
    }
    return { status: res.status, body: parsed as T };
  };
}
