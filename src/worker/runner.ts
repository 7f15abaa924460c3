import { EventEmitter } from "node:events";
import pg from "pg";
import { run, type Runner, type WorkerEvents } from "graphile-worker";
import { workerLogger } from "../core/logger.ts";
import { forgetPool, heartbeat, releaseDeadPools, scheduleSweep } from "../jobs/worker-pools.ts";
import { sweepIntervalS, taskList, type TaskDeps } from "./tasks.ts";

export interface WorkerOptions {
  databaseUrl: string;
  concurrency: number;
  pollIntervalMs: number;
}

export interface Worker {
  /** True while the runner is up and its LISTEN connection is established. */
  healthy(): boolean;
  stop(): Promise<void>;
}

/**
 * The graphile-worker runner in this process. graphile-worker only speaks `pg`, so it has a
 * pool of its own; our verbs still write through the drizzle pool. Jobs were enqueued in the
 * transactions that needed them, so this only runs them.
 */
export async function startWorker(deps: TaskDeps, opts: WorkerOptions): Promise<Worker> {
  const pgPool = new pg.Pool({ connectionString: opts.databaseUrl, max: opts.concurrency + 3, application_name: "signalbox-worker" });
  // Without these an idle client's error would crash the process (graphile/worker#178).
  pgPool.on("error", (err) => deps.log.warn({ err }, "worker pool connection error"));
  pgPool.on("connect", (client) => client.on("error", (err) => deps.log.warn({ err }, "worker client error")));

  const events = new EventEmitter() as WorkerEvents;
  let poolId: string | undefined;
  let listening = false;
  events.on("pool:create", ({ workerPool }) => (poolId = workerPool.id));
  events.on("pool:listen:success", () => (listening = true));
  events.on("pool:listen:error", () => (listening = false));

  const runner: Runner = await run({
    pgPool,
    events,
    noHandleSignals: true,
    concurrency: opts.concurrency,
    pollInterval: opts.pollIntervalMs,
    logger: workerLogger(deps.log),
    taskList: taskList(deps),
    parsedCronItems: [], // no crontab: the sweep schedules itself
    // The local queue fetches jobs in batches (fewer get_job round trips under load); jobs it
    // holds when a process dies are released by the sweep like any other locked job.
    preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0, localQueue: { size: opts.concurrency * 2 } } },
  });

  let stopped = false;
  const beat = async () => {
    if (!poolId || stopped) return;
    await heartbeat(deps.db, poolId).catch((err) => deps.log.warn({ err }, "heartbeat failed"));
    // The sweep reschedules itself, so a process that dies mid-sweep would leave the one sweep
    // job locked (for graphile-worker's 4 hours) and nobody would release its other jobs. Every
    // live process keeps one pending: add_job moves the key off a locked job to a new one.
    await scheduleSweep(deps.db, sweepIntervalS(deps.workerStaleS), true).catch((err) => deps.log.warn({ err }, "scheduling the sweep failed"));
  };
  await beat();
  const timer = setInterval(beat, Math.max(250, (deps.workerStaleS * 1000) / 3));
  timer.unref();
  // A process that died may have held jobs: release them now rather than at the next sweep.
  await releaseDeadPools(deps.db, deps.workerStaleS);
  await scheduleSweep(deps.db, sweepIntervalS(deps.workerStaleS), true);

  return {
    healthy: () => !stopped && listening,
    async stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      await runner.stop();
      if (poolId) await forgetPool(deps.db, poolId).catch(() => {});
      await pgPool.end();
    },
  };
}
