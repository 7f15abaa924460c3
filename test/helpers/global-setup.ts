import fs from "node:fs/promises";
import path from "node:path";
import postgres from "postgres";
import type { TestProject } from "vitest/node";
import { createLogger } from "../../src/core/logger.ts";
import { startEmbeddedPostgres, type EmbeddedDatabase } from "../../src/db/embedded.ts";
import { migrateDatabase } from "../../src/db/migrate.ts";

export const TEMPLATE_DB = "signalbox_test_template";

declare module "vitest" {
  export interface ProvidedContext {
    /** A server URL (any database name) where the migrated template database lives. */
    pgServerUrl: string;
  }
}

let embedded: EmbeddedDatabase | undefined;
// One data dir per test run, so runs side by side (several terminals) never share a cluster.
const dataDir = path.resolve(".test-pg", String(process.pid));

/**
 * One Postgres for the whole run: DATABASE_URL when given, else an embedded one. The schema is
 * migrated once into a template database; each test file clones it (graphile-worker's own tests
 * do the same), so files are isolated and run in parallel.
 */
export async function setup(project: TestProject) {
  let serverUrl = process.env.DATABASE_URL;
  if (!serverUrl) {
    await fs.rm(dataDir, { recursive: true, force: true });
    // A throwaway cluster: durability is not under test here (the crash tests kill signalbox,
    // not Postgres), so skip fsync and let commits return sooner.
    embedded = await startEmbeddedPostgres(dataDir, createLogger("warn"), { settings: { fsync: "off", synchronous_commit: "off", full_page_writes: "off" } });
    serverUrl = embedded.url;
  }
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`drop database if exists ${TEMPLATE_DB} with (force)`);
  await admin.unsafe(`create database ${TEMPLATE_DB}`);
  await admin.end();
  await migrateDatabase(withDatabase(serverUrl, TEMPLATE_DB));
  project.provide("pgServerUrl", serverUrl);
}

export async function teardown() {
  await embedded?.stop();
  if (embedded) await fs.rm(dataDir, { recursive: true, force: true });
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
