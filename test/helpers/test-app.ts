import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { afterAll, beforeAll, inject } from "vitest";
import type { Writable } from "node:stream";
import { createApp } from "../../src/app.ts";
import { parseSecretKey, SecretBox } from "../../src/auth/secret-box.ts";
import { loadConfig, type Config } from "../../src/config.ts";
import type { Deps } from "../../src/deps.ts";
import { createLogger } from "../../src/core/logger.ts";
import { createMetrics } from "../../src/core/metrics.ts";
import { openDatabase, type Database } from "../../src/db/client.ts";
import { pingDatabase } from "../../src/db/ping.ts";
import { callbackKey } from "../../src/auth/bootstrap-secrets.ts";
import { ChangeFeed } from "../../src/events/change-feed.ts";
import { SignalTypeCache } from "../../src/signal-types/signal-type-cache.ts";
import { closeServer } from "../../src/http/close-server.ts";
import { connectionLimits } from "../../src/http/connection-limits.ts";
import { startHttpServer } from "../../src/http/http-server.ts";
import { startWorker, type Worker } from "../../src/worker/runner.ts";
import { TEMPLATE_DB, withDatabase } from "./global-setup.ts";

export const API_KEY = "test-management-key";
export const CALLBACK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/** The approval-link key ring every test app uses unless `env` gives SIGNALBOX_LINK_KEYS. */
export const LINK_KEYS = "test-k1:test-link-key-one-0123456789abcdefghijkl";

/**
 * A fresh database cloned from the migrated template (or, with `{ empty: true }`, one with no
 * schema at all); dropped by the returned function.
 */
export async function createTestDatabase(opts: { empty?: boolean } = {}): Promise<{ url: string; drop(): Promise<void> }> {
  const serverUrl = inject("pgServerUrl");
  const name = `sbx_test_${randomBytes(6).toString("hex")}`;
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  // CREATE DATABASE ... TEMPLATE fails while anything else is connected to the template; retry briefly.
  for (let attempt = 0; ; attempt++) {
    try {
      await admin.unsafe(`create database ${name} template ${opts.empty ? "template0" : TEMPLATE_DB}`);
      // SQL debug points (signalbox.debug_point) take effect in test databases only.
      if (!opts.empty) await admin.unsafe(`alter database ${name} set signalbox.debug_points = 'on'`);
      break;
    } catch (err) {
      if (attempt > 50) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    url: withDatabase(serverUrl, name),
    drop: async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
      await admin.end();
    },
  };
}

/**
 * A fresh test database for the whole file, with one SQL connection to it (no app): returns a
 * getter, valid from the file's beforeAll on.
 */
export function useTestSql(): () => postgres.Sql {
  let db: Awaited<ReturnType<typeof createTestDatabase>> | undefined;
  let sql: postgres.Sql | undefined;
  beforeAll(async () => {
    db = await createTestDatabase();
    sql = postgres(db.url, { max: 1, onnotice: () => {} });
  });
  afterAll(async () => {
    await sql?.end();
    await db?.drop();
  });
  return () => sql!;
}

export interface TestApp {
  baseUrl: string;
  databaseUrl: string;
  database: Database;
  deps: Deps;
  config: Config;
  changes: ChangeFeed;
  worker?: Worker;
  /** Connections the server holds open from one client address. */
  openConnections(address: string): number;
  /** fetch against the app with the management key (unless headers override it). */
  api(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  /** Run the job worker in this process (default true). */
  worker?: boolean;
  /** Reuse an existing database (a second "process" on the same database). */
  databaseUrl?: string;
  /** Where log lines go (default stdout); with `env.LOG_LEVEL` a test can read every line written. */
  logStream?: Writable;
}

/** The whole service on a real socket and a real database, as main.ts builds it. */
export async function startTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const db = opts.databaseUrl ? { url: opts.databaseUrl, drop: async () => {} } : await createTestDatabase();
  const config = loadConfig({
    SIGNALBOX_API_KEYS: API_KEY,
    SIGNALBOX_CALLBACK_SECRET: CALLBACK_SECRET,
    SIGNALBOX_LINK_KEYS: LINK_KEYS,
    SIGNALBOX_DELIVERY_BACKOFF_S: "0.05",
    SIGNALBOX_POLL_INTERVAL_MS: "100",
    SIGNALBOX_WORKER_STALE_S: "2",
    // Tests send from one address far faster than a sender would: limits on, but out of reach
    // (test/hostile/rate-limits.test.ts sets its own).
    SIGNALBOX_RATE_LIMIT_PER_ADDRESS: "1000000",
    SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: "1000000",
    // Every test client is 127.0.0.1, some holding a thousand long-polls at once.
    SIGNALBOX_MAX_CONNECTIONS_PER_ADDRESS: "5000",
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    ...opts.env,
  });
  const log = createLogger(config.LOG_LEVEL, opts.logStream);
  const database = openDatabase(db.url, { max: config.SIGNALBOX_DB_POOL_SIZE });
  // As main.ts: signing secrets are encrypted at rest when a key is configured.
  const secretBox = config.SIGNALBOX_SECRET_KEY ? new SecretBox(parseSecretKey(config.SIGNALBOX_SECRET_KEY)) : undefined;
  const deps: Deps = {
    db: database.db,
    config,
    log,
    secrets: {
      apiKeys: config.SIGNALBOX_API_KEYS,
      callbackSecret: callbackKey(CALLBACK_SECRET),
      linkKeys: config.SIGNALBOX_LINK_KEYS.map((k) => ({ kid: k.kid, secret: Buffer.from(k.secret, "utf8") })),
    },
    ...(secretBox ? { secretBox } : {}),
    signalTypeCache: new SignalTypeCache(),
    // One registry for the app and its worker, as main.ts builds them: /metrics shows both.
    metrics: createMetrics(),
  };
  await deps.signalTypeCache!.listen(database.sql, deps.db);
  const changes = new ChangeFeed({ maxHeld: config.SIGNALBOX_MAX_HELD_REQUESTS });
  await changes.listen(database.sql, log);
  const worker =
    opts.worker === false
      ? undefined
      : await startWorker(
          { ...deps, workerStaleS: config.SIGNALBOX_WORKER_STALE_S },
          { databaseUrl: db.url, concurrency: config.SIGNALBOX_WORKER_CONCURRENCY, deliveryConcurrency: config.SIGNALBOX_DELIVERY_CONCURRENCY, pollIntervalMs: config.SIGNALBOX_POLL_INTERVAL_MS },
        );
  const shutdown = new AbortController();
  const app = createApp({
    ...deps,
    ...(worker ? { callbackHandOff: worker.deliveries } : {}),
    changes,
    shutdown: shutdown.signal,
    readiness: { database: () => pingDatabase(database.db), worker: () => worker?.healthy() ?? false },
  });
  const limits = connectionLimits(config);
  const { server, connections } = startHttpServer(app.fetch, { port: 0, hostname: "127.0.0.1", limits });
  await new Promise<void>((resolve) => server.once("listening", resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    baseUrl,
    databaseUrl: db.url,
    database,
    deps,
    config,
    changes,
    worker,
    openConnections: connections.open,
    api(path, init = {}) {
      const { json, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (!headers.has("authorization")) headers.set("authorization", `Bearer ${API_KEY}`);
      if (json !== undefined) headers.set("content-type", "application/json");
      return fetch(baseUrl + path, { ...rest, headers, body: json !== undefined ? JSON.stringify(json) : rest.body });
    },
    async close() {
      shutdown.abort();
      await closeServer(server);
      await worker?.stop();
      await changes.close();
      await deps.signalTypeCache!.close();
      await database.close();
      await db.drop();
    },
  };
}
