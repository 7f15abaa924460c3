import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { afterAll } from "vitest";
import { freePort } from "../../src/core/free-port.ts";
import { API_KEY, CALLBACK_SECRET, createTestDatabase } from "../../test/helpers/test-app.ts";
import { killServices, NODE, onDatabase, startService, type ServiceProcess } from "../../test/helpers/service-process.ts";
import { waitFor } from "../../test/helpers/wait-for.ts";

export { API_KEY, CALLBACK_SECRET, NODE, waitFor };
export const EXAMPLES = path.resolve(import.meta.dirname, "..");

const cleanups: Array<() => Promise<unknown> | unknown> = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  killServices();
});

/** A database of its own on the run's Postgres (an empty one for an example's own tables), dropped after the file. */
export async function database(opts: { empty?: boolean } = {}): Promise<string> {
  const db = await createTestDatabase(opts);
  cleanups.push(() => db.drop());
  return db.url;
}

/** signalbox itself (`node src/main.ts`) on a fresh migrated database, with the test keys. */
export async function startSignalbox(): Promise<ServiceProcess> {
  const svc = await startService(onDatabase(await database()));
  cleanups.push(async () => {
    svc.child.kill("SIGTERM");
    await svc.exited;
  });
  return svc;
}

export interface ExampleProcess {
  child: ChildProcess;
  output(): string;
  alive(): boolean;
  /** Settles once the process has exited. */
  exited: Promise<void>;
  /** Resolves once the output contains `text`; fails at once if the process exits first. */
  printed(text: string, timeoutMs?: number): Promise<void>;
}

/**
 * Runs an example's program as a user would (`node src/main.ts` in its folder, on the Node that
 * runs signalbox) with the environment given plus the signalbox connection.
 */
export function startExample(dir: string, script: string, signalbox: ServiceProcess, env: Record<string, string>): ExampleProcess {
  const child = spawn(NODE, [script], {
    cwd: path.join(EXAMPLES, dir),
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH,
      SIGNALBOX_URL: signalbox.baseUrl,
      SIGNALBOX_TOKEN: API_KEY,
      SIGNALBOX_CALLBACK_SECRET: CALLBACK_SECRET,
      ...env,
    },
  });
  let output = "";
  let gone = false;
  child.stdout!.on("data", (d: Buffer) => (output += d.toString("utf8")));
  child.stderr!.on("data", (d: Buffer) => (output += d.toString("utf8")));
  const exited = new Promise<void>((resolve) => child.once("close", () => ((gone = true), resolve())));
  cleanups.push(async () => {
    if (!gone) child.kill("SIGTERM");
    await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    if (!gone) child.kill("SIGKILL");
  });
  return {
    child,
    output: () => output,
    alive: () => !gone,
    exited,
    printed: (text, timeoutMs = 60_000) =>
      waitFor(`${dir} to print ${JSON.stringify(text)}`, () => output.includes(text), {
        timeoutMs,
        gaveUp: () => (gone ? `${dir} exited` : undefined),
        context: () => output,
      }).then(() => {}),
  };
}

export { freePort };
