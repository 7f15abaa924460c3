import { EventEmitter } from "node:events";
import pg from "pg";
import { run, type Runner, type TaskList, type WorkerEvents } from "graphile-worker";
import { workerLogger } from "../core/logger.ts";
import { withinMs } from "../core/time-limit.ts";
import { nodePostgresTarget } from "../db/connection-url.ts";
import { armDeadlineAlarm } from "../jobs/deadline-alarm.ts";
import { forgetPool, heartbeat, releaseDeadPools, releasePool, scheduleSweep } from "../jobs/worker-pools.ts";
import { DeliveryEngine } from "../delivery/delivery-engine.ts";
import { deliveryTaskList, sweepIntervalS, timerTaskList, type TaskDeps } from "./tasks.ts";

export interface WorkerOptions {
  databaseUrl: string;
  /** Timeouts, timers and housekeeping run at once. */
  concurrency: number;
  /** Callback, notification and sensor jobs run at once (default SIGNALBOX_DELIVERY_CONCURRENCY). */
  deliveryConcurrency?: number;
  pollIntervalMs: number;
  /** Longest pause between two attempts to restart a runner that stopped (default 1 s). */
  maxRestartDelayMs?: number;
}

export interface WorkerStatus {
  /** A runner is up (not stopped, not between a stop and its restart). */
  running: boolean;
  /** Its last look for jobs reached the database. */
  polling: boolean;
  /** Its LISTEN connection for new jobs is up (without it, jobs are still found by polling). */
  listening: boolean;
  /** How many times the runner stopped by itself and was started again. */
  restarts: number;
}

export interface Worker {
  /** True while a runner is up and finds jobs: timeouts and callbacks are flowing. */
  healthy(): boolean;
  status(): WorkerStatus;
  stop(): Promise<void>;
}

interface Incarnation {
  runner: Runner;
  /** Its own pool: a relaunch after its connections stopped answering must not reuse them. */
  pgPool: pg.Pool;
  poolId: string | undefined;
  listening: boolean;
  /** When a worker last reached the database for a job, and when one last failed to. */
  lastPollOk: number;
  lastPollError: number;
  jobsRunning: number;
  /** Set once the pool started shutting down by itself: it takes no more jobs. */
  dying: boolean;
}

const STOP_RUNNER_MS = 4_000;
/**
 * How long graphile-worker's run() may take to start a runner on its new pool. It checks its
 * migrations (applied at start, by migrate.ts) and prepares: well under a second on a database
 * that answers. A connection that went silent right after it connected (a failover or a network
 * cut: open, no answer) would hold it for good, and connectionTimeoutMillis only bounds the
 * connect; the supervisor would then never try again.
 */
const START_RUNNER_MS = 15_000;
/** How graphile-worker 0.18's LocalQueue logs a fetch that failed (it emits no event for it). */
const LOCAL_QUEUE_FETCH_FAILED = "Error occurred fetching jobs";
/**
 * A runner whose workers have not reached the database for this long (and run nothing) is not
 * polling: 5 s, or longer when an idle runner looks for jobs less often than that.
 */
const pollSilenceMs = (pollIntervalMs: number) => Math.max(5_000, 2 * pollIntervalMs + 1_000);
/** How long a runner that stopped by itself may take to finish before its jobs are released anyway. */
const DYING_GRACE_MS = 10_000;

/** One supervised graphile-worker runner: its own pool, task list and concurrency. */
interface SupervisedRunner {
  status(): WorkerStatus;
  healthy(): boolean;
  poolId(): string | undefined;
  stop(): Promise<void>;
}

export interface RunnerStatuses {
  /** Timeouts, timers and housekeeping. */
  timers: WorkerStatus;
  /** Callbacks, notifications and sensor polls (outbound HTTP). */
  deliveries: WorkerStatus;
}

/**
 * The job runners of this process, supervised: one for timeouts, timers and housekeeping, one
 * for outbound HTTP (callbacks, notifications, sensor polls), each with its own task list,
 * concurrency and pool, so a timeout never waits for a slot a hung endpoint holds. Both must be
 * up for the worker to be healthy; each is restarted by itself.
 */
export async function startWorker(deps: TaskDeps, opts: WorkerOptions): Promise<Worker & { runners(): RunnerStatuses; deliveries: DeliveryEngine }> {
  const engine = new DeliveryEngine(deps, {
    perEndpoint: deps.config.SIGNALBOX_DELIVERY_ENDPOINT_CONCURRENCY,
    failuresToBackOff: deps.config.SIGNALBOX_DELIVERY_ENDPOINT_FAILURES,
  });
  const timers = await superviseRunner(deps, { ...opts, name: "timers", taskList: timerTaskList(deps) });
  const deliveries = await superviseRunner(deps, {
    ...opts,
    name: "deliveries",
    concurrency: opts.deliveryConcurrency ?? deps.config.SIGNALBOX_DELIVERY_CONCURRENCY,
    taskList: deliveryTaskList(deps, engine),
  }).catch(async (err: unknown) => {
    await timers.stop();
    throw err;
  });
  const runners = [timers, deliveries];
  let stopping = false;

  const beat = async () => {
    if (stopping) return;
    for (const r of runners) {
      const poolId = r.poolId();
      if (poolId) await heartbeat(deps.db, poolId).catch((err) => deps.log.warn({ err }, "heartbeat failed"));
    }
    // The sweep reschedules itself, so a process that dies mid-sweep would leave the one sweep
    // job locked (for graphile-worker's 4 hours) and nobody would release its other jobs. Every
    // live process keeps one pending: add_job moves the key off a locked job to a new one.
    await scheduleSweep(deps.db, sweepIntervalS(deps.workerStaleS), true).catch((err) => deps.log.warn({ err }, "scheduling the sweep failed"));
  };
  for (const r of runners) r.onRestart = beat;

  await beat();
  const timer = setInterval(beat, Math.max(250, (deps.workerStaleS * 1000) / 3));
  timer.unref();
  // A process that died may have held jobs: release them now rather than at the next sweep.
  await releaseDeadPools(deps.db, deps.workerStaleS);
  await scheduleSweep(deps.db, sweepIntervalS(deps.workerStaleS), true);
  await armDeadlineAlarm(deps.db); // timed waits opened from now on can rely on it

  const status = (): WorkerStatus => {
    const [a, b] = [timers.status(), deliveries.status()];
    return { running: a.running && b.running, polling: a.polling && b.polling, listening: a.listening && b.listening, restarts: a.restarts + b.restarts };
  };
  return {
    deliveries: engine,
    status,
    runners: () => ({ timers: timers.status(), deliveries: deliveries.status() }),
    healthy: () => timers.healthy() && deliveries.healthy(),
    async stop() {
      if (stopping) return;
      stopping = true;
      clearInterval(timer);
      await Promise.all([timers.stop(), deliveries.stop()]);
      await bounded(engine.stop(), 500);
    },
  };
}

interface RunnerOptions extends WorkerOptions {
  name: string;
  taskList: TaskList;
}

/**
 * A graphile-worker runner, supervised. graphile-worker only speaks `pg`, so it has a pool of
 * its own; our verbs still write through the drizzle pool. Jobs were enqueued in the
 * transactions that needed them, so this only runs them.
 *
 * A runner stops by itself when the database stays away long enough (it cannot complete or fail
 * jobs, or its workers exit); `runner.promise` then settles. Nothing may look alive and do
 * nothing: the supervisor releases the jobs the stopped runner held and starts a new one, with
 * backoff, until the database answers again.
 */
async function superviseRunner(deps: TaskDeps, opts: RunnerOptions): Promise<SupervisedRunner & { onRestart?: () => Promise<void> }> {
  // Certificate files are read once, here: a pool built again later never fails on them.
  const target = nodePostgresTarget(opts.databaseUrl);
  // The clients of each pool, so that ending it can end those still held (endPool).
  const poolClients = new WeakMap<pg.Pool, Set<pg.Client>>();
  const newPool = () => {
    const clients = new Set<pg.Client>();
    const pgPool = new pg.Pool({
      ...target,
      max: opts.concurrency + 3,
      application_name: `signalbox-worker-${opts.name}`,
      connectionTimeoutMillis: 2_000, // an unreachable database fails a connect, never hangs it
      keepAlive: true, // a connection left behind by a stalled runner ends once its peer is found gone
    });
    // Without these an idle client's error would crash the process (graphile/worker#178).
    pgPool.on("error", (err) => deps.log.warn({ err, runner: opts.name }, "worker pool connection error"));
    pgPool.on("connect", (client) => {
      client.on("error", (err) => deps.log.warn({ err, runner: opts.name }, "worker client error"));
      clients.add(client);
      client.once("end", () => clients.delete(client));
    });
    poolClients.set(pgPool, clients);
    return pgPool;
  };
  // Its connections may hang (a failover that left them silent): nothing waits for it. A client
  // still held after that (a query sent into a silent connection) would keep its socket, and the
  // pool, for good: it is ended too (node-postgres destroys the socket of a client mid-query).
  const endPool = async (pgPool: pg.Pool) => {
    await bounded(pgPool.end().catch(() => {}), 500);
    for (const client of poolClients.get(pgPool) ?? []) void client.end().catch(() => {});
  };
  const silenceMs = pollSilenceMs(opts.pollIntervalMs);

  let current: Incarnation | undefined;
  let stopping = false;
  let restarts = 0;
  const maxRestartDelayMs = opts.maxRestartDelayMs ?? 1_000;
  const self: SupervisedRunner & { onRestart?: () => Promise<void> } = {
    status,
    healthy: () => {
      const s = status();
      return s.running && s.polling;
    },
    poolId: () => current?.poolId,
    async stop() {
      if (stopping) return;
      stopping = true;
      clearInterval(watchdog);
      const me = current;
      current = undefined;
      if (me) {
        // Lets running jobs finish; bounded, since completing them needs the database, which may be away.
        let stopped = false;
        const stop = me.runner.stop().catch((err: unknown) => deps.log.warn({ err }, "job runner stopped with an error"));
        await bounded(stop.then(() => (stopped = true)), STOP_RUNNER_MS);
        // A runner that stopped completed or released its jobs. One that did not still holds some:
        // this process is going, so they are released for another to run now (forgotten, they
        // would stay locked for graphile-worker's 4 hours). If the database cannot be reached the
        // pool's row stays, goes stale, and another process releases them.
        if (me.poolId) await bounded((stopped ? forgetPool : releasePool)(deps.db, me.poolId).catch(() => {}), 500);
        await endPool(me.pgPool);
      }
    },
  };

  async function launch(): Promise<void> {
    const events = new EventEmitter() as WorkerEvents;
    const me: Incarnation = { runner: undefined as unknown as Runner, pgPool: newPool(), poolId: undefined, listening: false, lastPollOk: Date.now(), lastPollError: 0, jobsRunning: 0, dying: false };
    events.on("pool:create", ({ workerPool }) => (me.poolId = workerPool.id));
    events.on("pool:listen:success", () => (me.listening = true));
    events.on("pool:listen:error", () => (me.listening = false));
    events.on("worker:getJob:error", () => (me.lastPollError = Date.now()));
    events.on("worker:getJob:empty", () => (me.lastPollOk = Date.now()));
    // The local queue fetches for the workers (they wait on it, silent, while it finds nothing):
    // its fetches are the polls. A failed fetch is only logged, so the log line tells it.
    events.on("localQueue:getJobs:complete", () => (me.lastPollOk = Date.now()));
    const observe = (level: string, message: string) => {
      if (level === "error" && message.startsWith(LOCAL_QUEUE_FETCH_FAILED)) me.lastPollError = Date.now();
    };
    events.on("job:start", () => ((me.lastPollOk = Date.now()), me.jobsRunning++));
    events.on("job:complete", () => me.jobsRunning--);
    // A pool shuts itself down when its workers exit or it cannot record job outcomes (the
    // database went away); it may then take long to finish, or never. Replace it at once.
    events.on("pool:gracefulShutdown", () => dying(me, "the worker pool is shutting down by itself"));
    events.on("pool:forcefulShutdown", () => dying(me, "the worker pool is shutting down by itself"));
    const starting = run({
      pgPool: me.pgPool,
      events,
      noHandleSignals: true,
      concurrency: opts.concurrency,
      pollInterval: opts.pollIntervalMs,
      logger: workerLogger(deps.log.child({ runner: opts.name }), observe),
      taskList: opts.taskList,
      parsedCronItems: [], // no crontab: the sweep schedules itself
      // The local queue: one get_job at a time for all the workers, a batch of up to
      // `concurrency` jobs each, and NOTIFYs arriving meanwhile folded into one more fetch.
      // Without it every idle worker polls by itself and each NOTIFY (one per job queued, a
      // future timeout's too) sets every busy worker asking again: two empty get_jobs per wait
      // opened. What it holds when the database goes away: jobs it fetched and no worker took
      // yet stay locked by this pool; when the pool stops (it does, the database gone long
      // enough) the supervisor releases whatever the pool id still holds (`releaseWhenFinished`),
      // and its own retries of handing them back only unlock rows still locked by its id.
      preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0, localQueue: { size: opts.concurrency } } },
    });
    try {
      me.runner = await withinMs(starting, START_RUNNER_MS, "starting the job runner");
    } catch (err) {
      // Given up on (the caller tries again on a new pool): should it start after all, nobody supervises it.
      void starting.then((runner) => ((me.runner = runner), discard(me)), () => {});
      await endPool(me.pgPool);
      throw err;
    }
    if (me.dying || stopping) {
      // Shut down while starting, or the process began stopping meanwhile (its stop found no runner to stop).
      await discard(me);
      throw new Error(stopping ? "the worker is stopping" : "the worker pool shut down while starting");
    }
    current = me;
    void me.runner.promise.then(
      () => dying(me, "the job runner stopped"),
      (err: unknown) => dying(me, "the job runner stopped", err),
    );
  }

  /** Stops a runner that will not be supervised, releases the jobs it holds and ends its pool. */
  async function discard(me: Incarnation): Promise<void> {
    await bounded(me.runner.stop().catch(() => {}), STOP_RUNNER_MS);
    if (me.poolId) await bounded(releasePool(deps.db, me.poolId).catch(() => {}), 500);
    await endPool(me.pgPool);
  }

  function dying(me: Incarnation, why: string, err?: unknown) {
    if (me.dying || stopping) return;
    me.dying = true;
    if (current !== me) return;
    current = undefined;
    restarts++;
    deps.log.error({ err, poolId: me.poolId, runner: opts.name }, `${why}: starting a new one`);
    // What the old pool holds is released once it has finished (or after a grace period).
    const finished = new Promise<void>((resolve) => {
      void me.runner.promise.then(resolve, resolve);
      setTimeout(resolve, DYING_GRACE_MS).unref();
    });
    void finished.then(() => endPool(me.pgPool));
    void relaunch(finished.then(() => me.poolId));
  }

  /**
   * A runner that stays away from the database with nothing running is stuck, not idle: its
   * connections stopped answering without an error (a failover or a network cut leaves them
   * open; new ones would work), and graphile-worker waits on them for good. It is told to stop
   * (should they wake, it takes no more jobs) and replaced on a new pool.
   */
  const watchdog = setInterval(() => {
    const me = current;
    if (!me || me.jobsRunning > 0 || Date.now() - me.lastPollOk < 2 * silenceMs) return;
    dying(me, `no look for jobs reached the database in ${(2 * silenceMs) / 1000} s`);
    void me.runner.stop().catch(() => {});
  }, 1_000);
  watchdog.unref();

  async function relaunch(deadPool: Promise<string | undefined>): Promise<void> {
    void releaseWhenFinished(deadPool);
    for (let attempt = 0; !stopping; attempt++) {
      await new Promise((r) => setTimeout(r, Math.min(maxRestartDelayMs, 100 * 2 ** attempt)));
      if (stopping) return;
      try {
        await launch();
        deps.log.info({ poolId: current?.poolId, attempt, runner: opts.name }, "job runner restarted");
        await self.onRestart?.();
        return;
      } catch (err) {
        if (attempt % 10 === 0) deps.log.warn({ err, attempt, runner: opts.name }, "job runner restart failed; trying again");
      }
    }
  }

  /** The stopped pool's jobs (locked by it) run again now rather than when it is seen as dead. */
  async function releaseWhenFinished(deadPool: Promise<string | undefined>): Promise<void> {
    const poolId = await deadPool;
    for (let attempt = 0; poolId && !stopping; attempt++) {
      try {
        return await releasePool(deps.db, poolId);
      } catch {
        await new Promise((r) => setTimeout(r, Math.min(maxRestartDelayMs, 100 * 2 ** attempt)));
      }
    }
  }

  const polling = (me: Incarnation | undefined) =>
    me !== undefined && me.lastPollOk >= me.lastPollError && (me.jobsRunning > 0 || Date.now() - me.lastPollOk < silenceMs);
  function status(): WorkerStatus {
    return { running: !stopping && current !== undefined, polling: polling(current), listening: current?.listening ?? false, restarts };
  }

  try {
    await launch();
  } catch (err) {
    clearInterval(watchdog);
    throw err;
  }
  return self;
}

/** Waits for `p` at most `ms`; whatever it was doing goes on without us. */
function bounded(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p.then(() => {}), new Promise<void>((r) => (timer = setTimeout(r, ms)))]).finally(() => clearTimeout(timer));
}
