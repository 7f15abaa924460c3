import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { answers200, killServices, processAlive, spawnService, startService, type ServiceProcess } from "../helpers/service-process.ts";
import { waitFor } from "../helpers/wait-for.ts";

// The embedded Postgres belongs to one signalbox process per SIGNALBOX_DATA_DIR. Real processes:
// `node src/main.ts` without DATABASE_URL, as `npm start` runs it.

const dirs: string[] = [];
afterAll(async () => {
  killServices();
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

/** A data dir the cluster's user can reach (mkdtemp makes 0700 directories). */
async function openDataDir(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-instance-"));
  await fs.chmod(dir, 0o755);
  dirs.push(dir);
  return path.join(dir, "data");
}

const postmasterPid = (svc: ServiceProcess) => svc.logs().find((l) => l.msg === "embedded Postgres started")?.pid as number;

async function stop(svc: ServiceProcess): Promise<void> {
  svc.child.kill("SIGTERM");
  expect(await svc.exited, svc.output()).toBe(0);
}

describe("one embedded signalbox per data dir", () => {
  it("a second start exits with one line naming the holder and never touches the running one; after a SIGKILL the next start takes over", async () => {
    const dataDir = await openDataDir();
    const first = await startService({ SIGNALBOX_DATA_DIR: dataDir });
    await answers200(first, "/readyz");
    const postmaster = postmasterPid(first);
    expect(postmaster).toBeGreaterThan(0);

    const second = await spawnService({ SIGNALBOX_DATA_DIR: dataDir });
    expect(await second.exited).toBe(1);
    const lines = second.output().trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`SIGNALBOX_DATA_DIR .* is in use by signalbox process ${first.pid} `));

    // The first one is untouched: same postmaster, still serving reads and writes.
    expect(processAlive(postmaster)).toBe(true);
    expect((await fetch(`${first.baseUrl}/readyz`)).status).toBe(200);
    expect((await first.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);

    // A crash leaves a stale lock and an orphaned postmaster: the next start recovers by itself.
    first.child.kill("SIGKILL");
    await first.exited;
    expect(processAlive(postmaster)).toBe(true);
    const third = await startService({ SIGNALBOX_DATA_DIR: dataDir });
    await answers200(third, "/readyz");
    expect(third.output()).toContain("stopping the embedded Postgres left running by a signalbox process that died");
    expect(processAlive(postmaster)).toBe(false);
    expect((await third.api("/signal-types/approval")).status).toBe(200); // the data survived

    await stop(third);
    expect((await fs.readdir(dataDir)).filter((f) => f.startsWith("signalbox.lock"))).toEqual([]);
  }, 90_000);

  it("SIGTERM while starting (creating the cluster, migrating) exits 0; the next start comes up", async () => {
    const dataDir = await openDataDir();
    // At the first line the process logs (the cluster is being made or started), and once the
    // embedded Postgres is up (migrations next).
    for (const when of [(l: Record<string, unknown>[]) => l.length > 0, (l: Record<string, unknown>[]) => l.some((x) => x.msg === "embedded Postgres started")]) {
      const starting = await spawnService({ SIGNALBOX_DATA_DIR: dataDir });
      await waitFor("the moment to interrupt the start", () => when(starting.logs()) || !starting.alive(), { intervalMs: 5, timeoutMs: 60_000 });
      starting.child.kill("SIGTERM");
      expect(await starting.exited, starting.output()).toBe(0);
    }
    const next = await startService({ SIGNALBOX_DATA_DIR: dataDir });
    await answers200(next, "/readyz");
    await stop(next);
  }, 90_000);

  it("a lock left by a process whose pid now belongs to another process is stale", async () => {
    const dataDir = await openDataDir();
    await fs.mkdir(dataDir, { recursive: true });
    // This very test runner's pid, alive, but not the process that wrote the lock (another start time).
    await fs.writeFile(path.join(dataDir, "signalbox.lock.7"), JSON.stringify({ pid: process.pid, started: "an earlier boot", since: "2020-01-01T00:00:00Z" }));
    const svc = await startService({ SIGNALBOX_DATA_DIR: dataDir });
    await answers200(svc, "/readyz");
    expect(await fs.readdir(dataDir)).toContain("signalbox.lock.8");
    expect(await fs.readdir(dataDir)).not.toContain("signalbox.lock.7");
    await stop(svc);
  }, 60_000);
});

describe.runIf(process.getuid?.() === 0)("as root, with the data dir under a private (0700) directory", () => {
  it("runs Postgres as the postgres user with the data in /var/lib/signalbox, says so in one line, and finds it again", async () => {
    const home = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-private-")); // 0700, like /root
    dirs.push(home);
    const dataDir = path.join(home, "data");
    const first = await startService({ SIGNALBOX_DATA_DIR: dataDir });
    await answers200(first, "/readyz");
    const moved = first.logs().filter((l) => String(l.msg).includes("the embedded Postgres data lives in /var/lib/signalbox/data/"));
    expect(moved).toHaveLength(1);
    const target = await fs.realpath(path.join(dataDir, "pg"));
    dirs.push(target);
    expect(target.startsWith("/var/lib/signalbox/data/")).toBe(true);
    expect((await first.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);
    await stop(first);

    const again = await startService({ SIGNALBOX_DATA_DIR: dataDir });
    await answers200(again, "/readyz");
    expect((await again.api("/signal-types/approval")).status).toBe(200);
    expect(again.output()).not.toContain("creating embedded Postgres cluster");
    await stop(again);
  }, 90_000);
});
