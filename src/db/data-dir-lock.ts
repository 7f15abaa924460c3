import fs from "node:fs";
import path from "node:path";
import { currentProcess, isRunning, type ProcessIdentity } from "./process-identity.ts";

/** One embedded signalbox per data dir: held from before Postgres starts until after it stopped. */
export interface DataDirLock {
  release(): void;
}

export class DataDirInUseError extends Error {
  readonly holder: ProcessIdentity & { since?: string };
  constructor(dataDir: string, holder: ProcessIdentity & { since?: string }) {
    super(
      `SIGNALBOX_DATA_DIR ${dataDir} is in use by signalbox process ${holder.pid}${holder.since ? ` (running since ${holder.since})` : ""}: ` +
        `stop that process first, or give this one another SIGNALBOX_DATA_DIR`,
    );
    this.name = "DataDirInUseError";
    this.holder = holder;
  }
}

interface Holder extends ProcessIdentity {
  since: string;
}

const PREFIX = "signalbox.lock.";

/**
 * Takes the data dir for this process, or throws DataDirInUseError naming the live holder.
 *
 * Node has no flock, and a lock file alone cannot be taken over safely from a dead holder (two
 * starters both see it stale; one removes the lock the other just took). So the lock is a
 * numbered file: the highest `signalbox.lock.<n>` is the lock, held while its process (pid and
 * start time) runs. To take a stale lock, a starter links its own file as `<n+1>`: link(2) is
 * atomic and fails if the name exists, so exactly one starter gets each number, with its
 * content complete. The winner removes the older numbers.
 */
export function lockDataDir(dataDir: string): DataDirLock {
  const me: Holder = { ...currentProcess(), since: new Date().toISOString() };
  const draft = path.join(dataDir, `.${PREFIX}${me.pid}-${Math.random().toString(36).slice(2)}`);
  fs.writeFileSync(draft, JSON.stringify(me) + "\n", { mode: 0o644 });
  try {
    for (let attempt = 0; attempt < 20; attempt++) {
      const newest = newestLock(dataDir);
      if (newest) {
        const holder = readHolder(path.join(dataDir, newest.name));
        // An unreadable lock file (damaged, or from a future format) counts as stale only if
        // nothing in it says otherwise: a live pid is never taken over.
        if (holder && holder.pid !== me.pid && isRunning(holder)) throw new DataDirInUseError(dataDir, holder);
      }
      const name = `${PREFIX}${(newest?.n ?? 0) + 1}`;
      try {
        fs.linkSync(draft, path.join(dataDir, name));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "EEXIST") continue; // another starter took that number: look again
        throw err;
      }
      for (const older of locks(dataDir)) if (older.name !== name) fs.rmSync(path.join(dataDir, older.name), { force: true });
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          fs.rmSync(path.join(dataDir, name), { force: true });
        },
      };
    }
    throw new Error(`could not lock SIGNALBOX_DATA_DIR ${dataDir}: other processes keep taking it`);
  } finally {
    fs.rmSync(draft, { force: true });
  }
}

function locks(dataDir: string): Array<{ name: string; n: number }> {
  return fs
    .readdirSync(dataDir)
    .filter((name) => name.startsWith(PREFIX) && /^\d+$/.test(name.slice(PREFIX.length)))
    .map((name) => ({ name, n: Number(name.slice(PREFIX.length)) }));
}

function newestLock(dataDir: string): { name: string; n: number } | undefined {
  return locks(dataDir).sort((a, b) => b.n - a.n)[0];
}

function readHolder(file: string): Holder | undefined {
  try {
    const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as Partial<Holder>;
    return typeof parsed.pid === "number" && typeof parsed.started === "string" ? (parsed as Holder) : undefined;
  } catch {
    return undefined;
  }
}
