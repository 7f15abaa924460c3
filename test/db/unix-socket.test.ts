import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { overSocket, postgresJsTarget } from "../../src/db/connection-url.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { answers200, killServices, processAlive, startService, type ServiceProcess } from "../helpers/service-process.ts";
import { waitFor } from "../helpers/wait-for.ts";

// The embedded Postgres listens on a Unix socket in its own directory, and signalbox's own
// connections (the API's pool, LISTEN, both job runners) go through it rather than loopback TCP.

const dirs: string[] = [];
afterAll(async () => {
  killServices();
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

describe("a database URL naming a socket (?host=/dir, as libpq and node-postgres read it)", () => {
  it("is a postgres.js path to <dir>/.s.PGSQL.<port>, without the host parameter", () => {
    expect(postgresJsTarget("postgres://u:p@127.0.0.1:6543/db?host=%2Fvar%2Frun%2Fpg&sslmode=disable")).toEqual({
      url: "postgres://u:p@127.0.0.1:6543/db",
      path: "/var/run/pg/.s.PGSQL.6543",
      ssl: false,
    });
    expect(postgresJsTarget("postgres://u@localhost/db?host=/tmp").path).toBe("/tmp/.s.PGSQL.5432");
    // A host that is not a directory is the host, as libpq reads it (test/db/tls.test.ts).
    expect(postgresJsTarget("postgres://u@db.example:5432/db?host=db2.example")).toEqual({ url: "postgres://u@db2.example:5432/db", ssl: false });
    expect(postgresJsTarget("postgres://u@db.example:5432/db")).toEqual({ url: "postgres://u@db.example:5432/db", ssl: false });
    expect(postgresJsTarget(overSocket("postgres://u:p@127.0.0.1:7000/db", "/a b/c")).path).toBe("/a b/c/.s.PGSQL.7000");
  });
});

/** A data dir the cluster's user can reach (as root, Postgres runs as `postgres`), `extra` levels deep. */
async function openDataDir(extra = ""): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-socket-"));
  await fs.chmod(dir, 0o755);
  dirs.push(dir);
  const data = path.join(dir, extra, "data");
  await fs.mkdir(data, { recursive: true, mode: 0o755 });
  for (let d = data; d !== dir; d = path.dirname(d)) await fs.chmod(d, 0o755);
  return data;
}

const started = (svc: ServiceProcess) => svc.logs().find((l) => l.msg === "embedded Postgres started") as { port: number; pid: number };

/** signalbox's own backends, each with how it connected: a socket, or TCP. */
async function backends(dataDir: string, port: number): Promise<Array<{ name: string; via: "socket" | "tcp" }>> {
  const password = (await fs.readFile(path.join(dataDir, "pg-password"), "utf8")).trim();
  const admin = postgres({ host: "127.0.0.1", port, user: "signalbox", password, database: "signalbox", max: 1, onnotice: () => {} });
  try {
    const rows = await admin<Array<{ name: string; tcp: boolean }>>`
      select application_name as name, client_addr is not null as tcp from pg_stat_activity
      where application_name like 'signalbox%' and pid <> pg_backend_pid()`;
    return rows.map((r) => ({ name: r.name, via: r.tcp ? "tcp" : "socket" }));
  } finally {
    await admin.end({ timeout: 5 });
  }
}

/** A wait resumed end to end: the API's pool, the intake, a delivery job and its record. */
async function resumeOne(svc: ServiceProcess, run: string): Promise<void> {
  const receiver = await startCallbackReceiver();
  try {
    expect((await svc.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBeLessThan(300);
    expect((await svc.api(`/runs/${run}/waits`, { method: "POST", json: { signal: "approval", callback_url: receiver.url } })).status).toBe(201);
    expect((await svc.api(`/signals/${run}/approval`, { method: "POST", json: { ok: true } })).status).toBe(202);
    const [cb] = await receiver.waitFor(1);
    expect(cb!.json.type).toBe("signal.received");
  } finally {
    await receiver.close();
  }
}

describe("the embedded Postgres's socket", () => {
  it("carries every connection of signalbox's; after a SIGKILL of both, the next start leaves no stale socket behind", async () => {
    const dataDir = await openDataDir();
    const first = await startService({ SIGNALBOX_DATA_DIR: dataDir });
    await answers200(first, "/readyz");
    await resumeOne(first, "socket-1");
    const pools = ["signalbox", "signalbox-listen", "signalbox-worker-timers", "signalbox-worker-deliveries"];
    const seen = await waitFor("a backend of each pool", () => backends(dataDir, started(first).port), {
      until: (b) => pools.every((name) => b.some((x) => x.name === name)),
      timeoutMs: 10_000,
    });
    expect(seen.filter((b) => b.via === "tcp")).toEqual([]);

    // A crash of both leaves the old socket's files: the next start (a new port) removes them.
    const postmaster = started(first).pid;
    first.child.kill("SIGKILL");
    await first.exited;
    process.kill(postmaster, "SIGKILL");
    await waitFor("the postmaster gone", () => !processAlive(postmaster), { timeoutMs: 10_000 });
    const socketDir = await fs.realpath(path.join(dataDir, "pg"));
    expect((await fs.readdir(socketDir)).filter((f) => f.startsWith(".s.PGSQL."))).not.toEqual([]);

    const next = await startService({ SIGNALBOX_DATA_DIR: dataDir });
    await answers200(next, "/readyz");
    await resumeOne(next, "socket-2");
    const port = started(next).port;
    expect((await fs.readdir(socketDir)).filter((f) => f.startsWith(".s.PGSQL.")).sort()).toEqual([`.s.PGSQL.${port}`, `.s.PGSQL.${port}.lock`]);
    next.child.kill("SIGTERM");
    expect(await next.exited, next.output()).toBe(0);
  }, 90_000);

  it("a data dir too deep for a socket path (107 bytes) goes over TCP, and works", async () => {
    const dataDir = await openDataDir("x".repeat(60) + "/" + "y".repeat(40));
    const svc = await startService({ SIGNALBOX_DATA_DIR: dataDir });
    await answers200(svc, "/readyz");
    await resumeOne(svc, "tcp-1");
    const seen = await backends(dataDir, started(svc).port);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((b) => b.via === "socket")).toEqual([]);
    svc.child.kill("SIGTERM");
    expect(await svc.exited, svc.output()).toBe(0);
  }, 90_000);
});
