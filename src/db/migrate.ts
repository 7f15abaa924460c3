import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { runMigrations } from "graphile-worker";
import { applyFunctions, readFunctionSources } from "./apply-functions.ts";
import { nodePostgresTarget, postgresJs } from "./connection-url.ts";

const DB_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../db");
export const MIGRATIONS_DIR = path.join(DB_DIR, "migrations");
export const FUNCTIONS_DIR = path.join(DB_DIR, "functions");
const LOCK_KEY = "signalbox:migrations";

/**
 * graphile-worker's schema first (it tolerates concurrent installers), then ours under an
 * advisory lock (drizzle's migrator has none, and several processes may start at once): the
 * append-only migrations (tables, indexes, triggers), then the SQL functions of db/functions.
 *
 * drizzle applies every journal entry whose `when` is later than the newest one the database
 * recorded, so each new migration's `when` must be later than every earlier one's: the test
 * test/db/migrations.test.ts holds that, and the digest of every committed migration.
 */
export async function migrateDatabase(
  url: string,
  dirs = { migrations: MIGRATIONS_DIR, functions: FUNCTIONS_DIR },
  /** Called when another process holds the migration lock, before waiting for it (a start behind a stuck migrator must not wait in silence). */
  onWaitingForLock?: () => void,
): Promise<{ functions: "applied" | "kept_newer" }> {
  const workerPool = new pg.Pool({ ...nodePostgresTarget(url), max: 1 });
  // An idle client's error would end the process: runMigrations reports the errors that matter.
  workerPool.on("error", () => {});
  workerPool.on("connect", (client) => client.on("error", () => {}));
  try {
    await runMigrations({ pgPool: workerPool, logger: silentLogger() });
  } finally {
    await workerPool.end();
  }
  const client = postgresJs(url, { max: 1, onnotice: () => {} });
  try {
    const [free] = await client<Array<{ locked: boolean }>>`select pg_try_advisory_lock(hashtext(${LOCK_KEY})) as locked`;
    if (!free?.locked) {
      onWaitingForLock?.();
      await client`select pg_advisory_lock(hashtext(${LOCK_KEY}))`;
    }
    try {
      await migrate(drizzle(client), { migrationsFolder: dirs.migrations, migrationsSchema: "drizzle", migrationsTable: "signalbox_migrations" });
      // An older release starting against a database a newer one migrated (a rolling deploy, a
      // rollback) keeps the newer functions: its own bodies may not fit the newer tables, and
      // putting them back would break the newer processes.
      if (await migratedByNewerRelease(client, dirs.migrations)) return { functions: "kept_newer" };
      await applyFunctions(client, await readFunctionSources(dirs.functions));
      return { functions: "applied" };
    } finally {
      await client`select pg_advisory_unlock(hashtext(${LOCK_KEY}))`;
    }
  } finally {
    await client.end({ timeout: 5 });
  }
}

/** Whether the database recorded a migration later than every one this release holds. */
async function migratedByNewerRelease(client: postgres.Sql, migrationsDir: string): Promise<boolean> {
  const journal = JSON.parse(await fs.readFile(path.join(migrationsDir, "meta", "_journal.json"), "utf8")) as { entries: Array<{ when: number }> };
  const ours = Math.max(...journal.entries.map((e) => e.when));
  const [row] = await client<Array<{ newest: string | null }>>`select max(created_at)::text as newest from drizzle.signalbox_migrations`;
  return row?.newest != null && Number(row.newest) > ours;
}

function silentLogger() {
  // graphile-worker logs every migration at info; our own log says "migrated".
  return undefined;
}
