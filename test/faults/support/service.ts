import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { freePort } from "../../../src/core/free-port.ts";
import { API_KEY, CALLBACK_SECRET } from "../../helpers/test-app.ts";

const NODE = path.resolve("node_modules/.bin/node");

/** `node src/main.ts` as a child process, as production runs it. */
export interface Service {
  baseUrl: string;
  child: ChildProcess;
  exited: Promise<number | string | null>;
  output: string[];
  alive(): boolean;
  api(p: string, init?: { method?: string; json?: unknown; timeoutMs?: number }): Promise<Response>;
}

export async function startService(databaseUrl: string, env: Record<string, string> = {}): Promise<Service> {
  const port = await freePort();
  const child = spawn(NODE, ["src/main.ts"], {
    cwd: path.resolve("."),
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: databaseUrl,
      PORT: String(port),
      SIGNALBOX_API_KEYS: API_KEY,
      SIGNALBOX_CALLBACK_SECRET: CALLBACK_SECRET,
      SIGNALBOX_WORKER_STALE_S: "3",
      SIGNALBOX_POLL_INTERVAL_MS: "100",
      SIGNALBOX_DELIVERY_BACKOFF_S: "0.2",
      LOG_LEVEL: "warn",
      ...env,
    },
  });
  const output: string[] = [];
  child.stdout!.on("data", (c: Buffer) => output.push(c.toString("utf8")));
  child.stderr!.on("data", (c: Buffer) => output.push(c.toString("utf8")));
  let gone = false;
  const exited = new Promise<number | string | null>((resolve) => child.once("close", (code, signal) => ((gone = true), resolve(signal ?? code))));
  const baseUrl = `http://127.0.0.1:${port}`;
  const api: Service["api"] = (p, init = {}) =>
    fetch(baseUrl + p, {
      method: init.method ?? "GET",
      headers: { authorization: `Bearer ${API_KEY}`, ...(init.json !== undefined ? { "content-type": "application/json" } : {}) },
      body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
      signal: AbortSignal.timeout(init.timeoutMs ?? 10_000),
    });
  for (const deadline = Date.now() + 60_000; ; ) {
    if (gone) throw new Error(`signalbox exited before serving:\n${output.join("")}`);
    if ((await fetch(`${baseUrl}/readyz`).catch(() => undefined))?.status === 200) break;
    if (Date.now() > deadline) throw new Error(`signalbox not ready within 60 s:\n${output.join("")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { baseUrl, child, exited, output, alive: () => !gone, api };
}
