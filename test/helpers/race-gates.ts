import postgres from "postgres";
import { clearDebugHooks, setDebugHook, type DebugPointName } from "../../src/core/debug-point.ts";
import type { TaskName } from "../../src/jobs/enqueue.ts";
import type { TestApp } from "./test-app.ts";
import { waitFor } from "./wait-for.ts";

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

/** The points inside SQL functions (signalbox.debug_point calls). */
export type SqlDebugPointName = "accept-signals:locked" | "open-wait:locked" | "continue-run:locked";

/**
 * Holds the transaction that reaches SQL debug point `name` for `subject` (a run id) inside a
 * SQL function, until `release()`: the test holds the advisory lock that signalbox.debug_point
 * takes in test databases, on a connection of its own. `reached` resolves once a backend waits
 * for it (that transaction holds everything it took before the point, e.g. the run's lock).
 */
export async function holdInSql(app: TestApp, name: SqlDebugPointName, subject: string): Promise<Gate> {
  const sql = postgres(app.databaseUrl, { max: 1, onnotice: () => {} });
  const key = `${name}:${subject}`;
  await sql`select pg_advisory_lock(hashtextextended(${key}, 0))`;
  let released: Promise<void> | undefined;
  const release = () => {
    released ??= sql`select pg_advisory_unlock(hashtextextended(${key}, 0))`.then(() => sql.end({ timeout: 5 }));
    void released;
  };
  open.add(release);
  const reached = waitFor(`a transaction at ${key}`, async () => {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_locks l, (select hashtextextended(${key}, 0) as k) as h
      where l.locktype = 'advisory' and not l.granted and l.objsubid = 1
        and l.database = (select oid from pg_database where datname = current_database())
        and l.classid::bigint = (h.k >> 32) & 4294967295 and l.objid::bigint = h.k & 4294967295`;
    return row!.n > 0;
  }).then(() => subject);
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
  await waitFor(`${n} backend(s) waiting for a lock`, async () => {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
    return row!.n;
  }, { until: (waiting) => waiting >= n, timeoutMs });
}

/**
 * Resolves once `n` requests are held open on the app's change feed (a long-poll, a checkpoint, an
 * event stream registered for its wake-up): from then on a change reaches them by NOTIFY.
 */
export async function heldOpen(app: TestApp, n = 1, timeoutMs = 10_000): Promise<void> {
  await waitFor(`${n} request(s) held open for a change`, () => app.changes.size, { until: (held) => held >= n, timeoutMs });
}

/**
 * Resolves once no timeout or delivery job is left (pending, retrying or running): from then on
 * nothing can fire or call back any more, so counting callbacks is final. The jobs that always
 * have one pending (the sweep, the retention purge, the deadline alarm unless it is running; it
 * covers only deadlines a minute away or more) do not count; `tasks` narrows it to those
 * tasks (deliveries only, when a test leaves a far-off timer behind), and `dueOnly` to the jobs
 * due by now or running (what the test clock has brought due has run; what it has not, waits).
 * Throws with the jobs left.
 */
export async function drainJobs(db: TestApp | postgres.Sql, opts: { timeoutMs?: number; tasks?: TaskName[]; dueOnly?: boolean } = {}): Promise<void> {
  const sql = "database" in db ? db.database.sql : db;
  const tasks = opts.tasks ?? null;
  const dueOnly = opts.dueOnly ?? false;
  await waitFor(
    "the job queue to drain",
    () => sql<{ task_identifier: string; key: string | null; run_at: Date; attempts: number; last_error: string | null }[]>`
      select task_identifier, key, run_at, attempts, last_error from graphile_worker.jobs
      where task_identifier not in ('sweep', 'purge_old_records') and (task_identifier <> 'expire_due' or locked_at is not null) and (${tasks}::text[] is null or task_identifier = any(${tasks}::text[]))
        and (not ${dueOnly} or run_at <= now() or locked_at is not null)`,
    { until: (left) => left.length === 0, timeoutMs: opts.timeoutMs ?? 15_000 },
  );
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
