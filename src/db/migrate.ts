import path from "node:path";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { runMigrations } from "graphile-worker";

const MIGRATIONS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../db/migrations");
const LOCK_KEY = "signalbox:migrations";

/**
 * graphile-worker's schema first (it tolerates concurrent installers), then ours under an
 * advisory lock: drizzle's migrator has none, and several processes may start at once.
 */
export async function migrateDatabase(url: string): Promise<void> {
  await runMigrations({ connectionString: url, logger: silentLogger() });
  const client = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await client`select pg_advisory_lock(hashtext(${LOCK_KEY}))`;
    try {
      await migrate(drizzle(client), { migrationsFolder: MIGRATIONS_DIR, migrationsSchema: "drizzle", migrationsTable: "signalbox_migrations" });
    } finally {
      await client`select pg_advisory_unlock(hashtext(${LOCK_KEY}))`;
    }
  } finally {
    await client.end({ timeout: 5 });
  }
}

function silentLogger() {
  // graphile-worker logs every migration at info; our own log says "migrated".
  return undefined;
}
