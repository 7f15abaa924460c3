import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { freePort } from "../../src/core/free-port.ts";
import type { PrivatePostgres } from "./private-postgres.ts";
import { waitFor } from "./wait-for.ts";

const run = promisify(execFile);

/** Debian's PgBouncer (`apt-get install pgbouncer`; .ci/run installs it when missing), or undefined. */
export const PGBOUNCER = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].find((f) => existsSync(f));

export interface Pooler {
  /** The private Postgres's database through the pooler, in transaction mode. */
  transactionUrl: string;
  /** The same database through the pooler, in session mode. */
  sessionUrl: string;
  /** The same database through the pooler, in statement mode (no transactions). */
  statementUrl: string;
  stop(): Promise<void>;
}

/**
 * A real PgBouncer in front of a private Postgres (trust auth), as managed providers put one in
 * front of theirs: one database name pooled per transaction, one per session, one per statement.
 * Run as the `postgres` system user when the tests run as root (PgBouncer refuses root).
 */
export async function startPgbouncer(pg: PrivatePostgres): Promise<Pooler> {
  if (!PGBOUNCER) throw new Error("pgbouncer is not installed");
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-pgbouncer-"));
  const target = new URL(pg.url);
  const [port, user, database] = [await freePort(), decodeURIComponent(target.username), target.pathname.slice(1)];
  const server = `host=${target.hostname} port=${target.port} dbname=${database}`;
  await fs.writeFile(path.join(dir, "users.txt"), `"${user}" ""\n`);
  await fs.writeFile(
    path.join(dir, "pgbouncer.ini"),
    [
      "[databases]",
      `pooled_tx = ${server} pool_mode=transaction`,
      `pooled_session = ${server} pool_mode=session`,
      `pooled_statement = ${server} pool_mode=statement`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = trust",
      `auth_file = ${path.join(dir, "users.txt")}`,
      "max_client_conn = 200",
      "default_pool_size = 20",
      // postgres.js and node-postgres send these at connect; PgBouncer refuses what it does not know.
      "ignore_startup_parameters = extra_float_digits,options",
      "",
    ].join("\n"),
  );
  let ids: { uid?: number; gid?: number } = {};
  if (process.getuid?.() === 0) {
    ids = { uid: Number((await run("id", ["-u", "postgres"])).stdout.trim()), gid: Number((await run("id", ["-g", "postgres"])).stdout.trim()) };
    await fs.chown(dir, ids.uid!, ids.gid!);
    for (const f of ["users.txt", "pgbouncer.ini"]) await fs.chown(path.join(dir, f), ids.uid!, ids.gid!);
  }
  const child: ChildProcess = spawn(PGBOUNCER, [path.join(dir, "pgbouncer.ini")], { ...ids, stdio: "ignore" });
  await waitFor("pgbouncer listening", () => accepts(port), { until: (ok) => ok, timeoutMs: 10_000 });
  const url = (db: string) => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${db}`;
  return {
    transactionUrl: url("pooled_tx"),
    sessionUrl: url("pooled_session"),
    statementUrl: url("pooled_statement"),
    async stop() {
      child.kill("SIGKILL");
      await fs.rm(dir, { recursive: true, force: true });
    },
  };
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}
