import type postgres from "postgres";
import { clearDebugHooks, setDebugHook, type DebugPointName } from "../../src/core/debug-point.ts";
import type { TestApp } from "./test-app.ts";

export interface Gate {
  /** Resolves with the subject (wait or run id) of the first arrival at the point. */
  reached: Promise<string>;
  release(): void;
}

const open = new Set<() => void>();

/**
 * Holds the first transaction that arrives at `name` until `release()`; later arrivals pass.
 * The hook runs in this test process, where startTestApp's app and worker live.
 */
export function holdAt(name: DebugPointName): Gate {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let arrive!: (subject: string) => void;
  const reached = new Promise<string>((r) => (arrive = r));
  let armed = true;
  setDebugHook(name, async (subject) => {
    if (!armed) return;
    armed = false;
    arrive(subject);
    await released;
  });
  open.add(release);
  return { reached, release };
}

/** Notes the first arrival at `name` without holding it. */
export function observe(name: DebugPointName): Promise<string> {
  return new Promise<string>((resolve) => setDebugHook(name, (subject) => resolve(subject)));
}

/** Releases every gate and removes every hook (afterEach: a held job would block worker.stop). */
export function releaseAllGates(): void {
  for (const release of open) release();
  open.clear();
  clearDebugHooks();
}

/** Resolves once `n` backends of this database wait for a lock (a transaction blocked on the run's row lock). */
export async function lockWaiters(sql: postgres.Sql, n = 1, timeoutMs = 10_000): Promise<void> {
  await until(async () => {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
    return row!.n >= n;
  }, timeoutMs, `${n} backend(s) waiting for a lock`);
}

/**
 * Resolves once no timeout or delivery job is left (pending, retrying or running): from then on
 * nothing can fire or call back any more, so counting callbacks is final. Throws with the jobs left.
 */
export async function drainJobs(db: TestApp | postgres.Sql, timeoutMs = 15_000): Promise<void> {
  const sql = "database" in db ? db.database.sql : db;
  const left = () => sql<{ task_identifier: string; key: string | null; attempts: number; last_error: string | null }[]>`
    select task_identifier, key, attempts, last_error from graphile_worker.jobs
    where task_identifier not in ('sweep', 'purge_old_records')`; // housekeeping: always one pending
  try {
    await until(async () => (await left()).length === 0, timeoutMs, "job queue drained");
  } catch (err) {
    throw new Error(`${(err as Error).message}; jobs left: ${JSON.stringify(await left())}`);
  }
}

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface RunEvent {
  id: string;
  type: string;
  wait_id: string | null;
  signal_id: string | null;
}

const RESOLUTIONS = new Set(["signal.received", "signal.timeout", "signal.cancelled"]);

/** The run's events that resolve a wait (received, timeout, cancelled). */
export async function resolutionEvents(app: TestApp, run: string): Promise<RunEvent[]> {
  const res = await app.api(`/runs/${encodeURIComponent(run)}/events?limit=500`);
  if (res.status !== 200) throw new Error(`GET /runs/${run}/events: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { items: RunEvent[] };
  return body.items.filter((e) => RESOLUTIONS.has(e.type));
}

/** A wait after long-polling until it leaves `waiting` (or `waitS` passes). */
export async function settledWait(app: TestApp, id: string, waitS = 10): Promise<Record<string, any>> {
  const res = await app.api(`/waits/${id}?wait_s=${waitS}`);
  if (res.status !== 200) throw new Error(`GET /waits/${id}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, any>;
}
