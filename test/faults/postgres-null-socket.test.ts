import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../helpers/test-app.ts";

// postgres.js 3.4.9 writes to a connection after `closed()` has dropped its socket (a transaction
// or reserved connection whose backend died), from a setImmediate: an uncatchable TypeError that
// kills the process (porsager/postgres #1066, #1154, #1208). patches/postgres+3.4.9.patch, applied
// by `npm install`'s postinstall (patch-package), fails those queries instead. This runs the same
// reproduction against the package as installed and against a copy with the patch taken out.

const root = path.resolve(import.meta.dirname, "../..");
const NODE = path.join(root, "node_modules/.bin/node");
const REPRO = path.join(import.meta.dirname, "support/null-socket-repro.ts");
const PATCH = path.join(root, "patches/postgres+3.4.9.patch");
const run = promisify(execFile);

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let tmp: string;

beforeAll(async () => {
  database = await createTestDatabase();
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), "postgres-unpatched-"));
  await fs.cp(path.join(root, "node_modules/postgres"), path.join(tmp, "node_modules/postgres"), { recursive: true });
  // Outside any git repository, `git apply` works like patch(1) on paths relative to tmp.
  await run("git", ["apply", "-R", PATCH], { cwd: tmp });
});
afterAll(async () => {
  await database?.drop();
  if (tmp) await fs.rm(tmp, { recursive: true, force: true });
});

async function reproduce(postgresDir: string) {
  const entry = path.join(postgresDir, "src/index.js");
  return run(NODE, [REPRO, entry, database.url], { cwd: root, timeout: 30_000 }).then(
    ({ stdout }) => ({ exitCode: 0, outcome: JSON.parse(stdout.trim().split("\n").pop()!) as Record<string, string>, stderr: "" }),
    (err: { code?: number; stderr?: string }) => ({ exitCode: err.code ?? -1, outcome: undefined, stderr: err.stderr ?? "" }),
  );
}

describe("postgres.js writing to a closed connection", () => {
  it("crashes the process without our patch (the reproduction is real)", async () => {
    const unpatched = await reproduce(path.join(tmp, "node_modules/postgres"));
    expect(unpatched.exitCode).not.toBe(0);
    expect(unpatched.stderr).toContain("Cannot read properties of null (reading 'write')");
  });

  it("with the installed (patched) package: every query on the dead connection fails, none hangs, the pool recovers", async () => {
    const patched = await reproduce(path.join(root, "node_modules/postgres"));
    expect(patched.stderr).toBe("");
    expect(patched.exitCode).toBe(0);
    const closed = ["CONNECTION_CLOSED", "ECONNRESET", "57P01"];
    expect(closed).toContain(patched.outcome!.transaction);
    expect(closed).toContain(patched.outcome!.reservedFirst);
    expect(closed).toContain(patched.outcome!.reservedSecond);
    expect(patched.outcome!.after).toBe("1");
  });
});
