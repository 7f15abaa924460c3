import { and, asc, eq, getTableColumns, gt, isNull, or, sql } from "drizzle-orm";
import { pgCode, withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { BadRequestError, ConflictError, NotFoundError } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import type { Db, Tx } from "../db/client.ts";
import { signals, waits } from "../db/schema.ts";
import { recordEvents } from "../events/events.queries.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { coverDeadline } from "../jobs/deadline-alarm.ts";
import { scheduleNotifications } from "./schedule-notifications.ts";
import { lockNewestRun } from "../runs/run-lock.ts";
import { loadSignalType } from "../signal-types/signal-type-cache.ts";
import { checkSensorTarget } from "./kinds/sensor-target.ts";
import type { SensorSpec } from "./kinds/sensor-spec.ts";
import { nextCronTime, type TimerSpec } from "./kinds/timer-spec.ts";
import { resolveWaits } from "./resolve-waits.ts";
import { toWaitResource, type WaitResource } from "./wait-view.ts";
import { findWait, findWaitByKey, waitFromSql } from "./waits.queries.ts";

/** What to wait for: a signal from outside (the default), a timer, a sensor, or a composite. */
export interface WaitSpec {
  signal: string;
  timeoutS?: number;
  timeoutAt?: Date;
  metadata?: Record<string, unknown>;
  timer?: TimerSpec;
  sensor?: SensorSpec;
  all?: WaitSpec[];
  any?: WaitSpec[];
  quorum?: { count: number; veto?: string[] };
}

export interface OpenWaitInput extends WaitSpec {
  runId: string;
  key?: string;
  callbackUrl?: string;
}

type Kind = "external" | "timer" | "sensor" | "all" | "any";
const kindOf = (s: WaitSpec): Kind => (s.timer ? "timer" : s.sensor ? "sensor" : s.all ? "all" : s.any ? "any" : "external");

interface Planned {
  id: string;
  spec: WaitSpec;
  kind: Kind;
  parentWaitId: string | null;
  firesAt: Date | null;
}

/**
 * Opens a wait (and, for a composite, its member waits) atomically with the jobs that will
 * end it: timeout, timer, sensor poll, notifications. A signal buffered for this run and name
 * is consumed at once (oldest first), so the new wait may already be `received`.
 */
export async function openWait(deps: Pick<Deps, "db" | "config" | "signalTypeCache">, input: OpenWaitInput): Promise<{ wait: WaitResource; created: boolean }> {
  const parentId = newId("wt");
  const members = input.all ?? input.any ?? [];
  const plan: Planned[] = [input, ...members].map((spec, i) => ({
    id: i === 0 ? parentId : newId("wt"),
    spec,
    kind: kindOf(spec),
    parentWaitId: i === 0 ? null : parentId,
    firesAt: spec.timer ? timerFiresAt(spec.timer) : null,
  }));
  const names = plan.map((p) => p.spec.signal);
  if (new Set(names).size !== names.length) throw new BadRequestError("a composite's waits need distinct signal names", [{ path: "/signal", message: "repeats a member's name" }]);
  for (const p of plan) if (p.spec.sensor) await checkSensorTarget(p.spec.sensor.url, deps.config.SIGNALBOX_SENSOR_ALLOW);

  const externals = plan.filter((p) => p.kind === "external").map((p) => p.spec.signal);
  const types = (await Promise.all(externals.map((name) => loadSignalType(deps, name)))).filter((t) => t !== undefined);
  const missing = externals.find((name) => !types.some((t) => t.name === name));
  if (missing) throw new NotFoundError(`no signal type named '${missing}'`);

  if (plan.length === 1 && plan[0]!.kind === "external" && !input.quorum && !types[0]?.notifyUrl) {
    const opened = await openPlainWait(deps.db, parentId, input);
    if (opened) return opened;
  }
  return withTransaction(deps.db, async (tx) => {
    // Addressed to a continued run: the wait opens on the newest run of its chain.
    const run = await lockNewestRun(tx, input.runId);
    const runId = run.run_id;
    if (input.key !== undefined) {
      const existing = await findWaitByKey(tx, runId, input.key);
      if (existing) {
        if (existing.signal !== input.signal) throw keyConflict(input, existing.signal);
        return { wait: toWaitResource(existing), created: false };
      }
    }
    if (run.status === "cancelled") throw runCancelled(input);
    // One open wait per run and name: the unique index decides (no read first).
    const inserted = await tx
      .insert(waits)
      .values(
        plan.map((p) => ({
          id: p.id,
          runId,
          signal: p.spec.signal,
          key: p.parentWaitId ? null : (input.key ?? null),
          timeoutAt: deadline(p.spec),
          callbackUrl: p.parentWaitId ? null : (input.callbackUrl ?? null),
          metadata: p.spec.metadata ?? (p.parentWaitId ? {} : (input.metadata ?? {})),
          kind: p.kind,
          source: p.spec.timer ?? p.spec.sensor ?? null,
          firesAt: p.firesAt,
          parentWaitId: p.parentWaitId,
          quorum: p.spec.quorum ?? null,
        })),
      )
      .returning({ ...getTableColumns(waits), overdue: sql<boolean>`${waits.timeoutAt} <= now()` })
      .catch((err: unknown) => {
        if (pgCode(err) === "23505" && constraintOf(err) === "waits_one_open") throw alreadyOpen(input, names);
        throw err;
      });
    await recordEvents(tx, plan.map((p) => ({ runId, type: "signal.waiting", waitId: p.id, data: { signal: p.spec.signal, kind: p.kind } })));

    // Members first: a member consuming a buffered signal may settle the parent at once.
    let resolvedAny = false;
    for (const p of [...plan.slice(1), plan[0]!]) {
      const row = inserted.find((r) => r.id === p.id)!;
      // A composite's parent may have been settled by its members: look before arming it.
      if (plan.length > 1 && (await findWait(tx, p.id))?.status !== "waiting") continue;
      resolvedAny = (await armWait(tx, p, runId, row)) || resolvedAny;
      const type = types.find((t) => t.name === p.spec.signal);
      if (type) await scheduleNotifications(tx, { waitId: p.id, timeoutAt: row.timeoutAt, notifyUrl: type.notifyUrl, remindersS: type.remindersS });
    }
    const parent = inserted.find((r) => r.id === parentId)!;
    // Read again when arming changed it: resolved, a composite, or a quorum that counted buffered votes.
    const wait = resolvedAny || plan.length > 1 || input.quorum ? (await findWait(tx, parentId))! : { ...parent, result: null };
    return { wait: toWaitResource(wait), created: true };
  });
}

/**
 * One external wait whose type sends no notifications (the common case) in one statement:
 * signalbox.open_wait (db/functions/open_wait.sql) does what the transaction below does for it,
 * a buffered signal or a past deadline resolving it at once included. Undefined when that
 * statement lost the one-open-wait race to a concurrent insert that the index caught.
 */
async function openPlainWait(db: Db, id: string, input: OpenWaitInput): Promise<{ wait: WaitResource; created: boolean } | undefined> {
  const timeoutAt = input.timeoutAt?.toISOString() ?? null;
  let row: { answer: string; wait: Record<string, unknown> | null } | undefined;
  try {
    [row] = await db.execute<{ answer: string; wait: Record<string, unknown> | null }>(sql`
      select * from signalbox.open_wait(${id}::text, ${input.runId}::text, ${input.signal}::text, ${input.key ?? null}::text,
        ${timeoutAt}::timestamptz, ${input.timeoutS ?? null}::double precision, ${input.callbackUrl ?? null}::text,
        ${JSON.stringify(input.metadata ?? {})}::jsonb)`);
  } catch (err) {
    // Rolled back whole: a concurrent insert the unique index caught, or add_job's rare
    // no-job answer. The transaction below then answers (409, the existing wait, or a retry).
    if (["23505", "40001", "40P01"].includes(pgCode(err) ?? "")) return undefined;
    throw err;
  }
  switch (row!.answer) {
    case "created": {
      const wait = waitFromSql(row!.wait!);
      // Received at once from a buffered signal: read it back with its result.
      return { wait: toWaitResource(wait.status === "waiting" ? { ...wait, result: null } : (await findWait(db, id))!), created: true };
    }
    case "existing":
      return { wait: toWaitResource((await findWait(db, String(row!.wait!.id)))!), created: false };
    case "key_conflict":
      throw keyConflict(input, String(row!.wait!.signal));
    case "cancelled":
      throw runCancelled(input);
    case "open_conflict":
      throw alreadyOpen(input, [input.signal]);
    default:
      return undefined; // not an answer open_wait gives today: the transaction below decides
  }
}

const keyConflict = (input: OpenWaitInput, signal: string) => new ConflictError(`key '${input.key}' already names a wait for signal '${signal}' in this run`);
const runCancelled = (input: OpenWaitInput) => new ConflictError(`run '${input.runId}' is cancelled`);
const alreadyOpen = (input: OpenWaitInput, names: string[]) =>
  new ConflictError(`run '${input.runId}' already has an open wait for signal ${names.map((n) => `'${n}'`).join(" or ")}`);

/** Sets up what will end one new wait; returns true when it ended at once (buffered signal, past deadline). */
async function armWait(tx: Tx, p: Planned, runId: string, row: { timeoutAt: Date | null; overdue: boolean }): Promise<boolean> {
  if (p.kind === "external") {
    // Signals sent before it opened: the first one receives it; a quorum wait counts them as votes.
    const { signal, quorum } = p.spec;
    if (await (quorum ? castBufferedVotes(tx, runId, signal, p.id, quorum) : consumeBufferedSignal(tx, runId, signal, p.id))) return true;
  }
  if (row.timeoutAt && row.overdue) {
    await resolveWaits(tx, { ids: [p.id] }, { status: "timed_out" });
    return true;
  }
  if (row.timeoutAt) await coverDeadline(tx, p.id, at(row.timeoutAt));
  if (p.firesAt) await addJob(tx, "fire_timer", { id: p.id }, { runAt: at(p.firesAt), jobKey: jobKeys.timer(p.id) });
  if (p.kind === "sensor") await addJob(tx, "poll_sensor", { id: p.id }, { jobKey: jobKeys.sensor(p.id) });
  return false;
}

const at = (d: Date) => sql`${d.toISOString()}::timestamptz`;

/** Deadlines are computed on the database clock, like the timeout job that enforces them. */
function deadline(spec: WaitSpec) {
  if (spec.timeoutAt) return spec.timeoutAt;
  if (spec.timeoutS !== undefined) return sql`now() + ${spec.timeoutS}::double precision * interval '1 second'`;
  return null;
}

function timerFiresAt(timer: TimerSpec): Date {
  if ("delay_s" in timer) return new Date(Date.now() + timer.delay_s * 1000);
  if ("at" in timer) return new Date(timer.at);
  return nextCronTime(timer.cron, timer.timezone, new Date());
}

async function consumeBufferedSignal(tx: Tx, runId: string, signal: string, waitId: string): Promise<boolean> {
  const [buffered] = await bufferedSignals(tx, runId, signal).limit(1);
  if (!buffered) return false;
  await tx.update(signals).set({ waitId }).where(eq(signals.id, buffered.id));
  await resolveWaits(tx, { ids: [waitId] }, { status: "received", signalId: buffered.id });
  return true;
}

/**
 * A quorum wait takes the votes sent before it opened, in the order the run accepted them, as
 * intake counts them (signalbox.cast_vote): it is received with the vote that decides it, and
 * the buffered signals after that one stay for the run's next wait.
 */
async function castBufferedVotes(tx: Tx, runId: string, signal: string, waitId: string, quorum: NonNullable<OpenWaitInput["quorum"]>): Promise<boolean> {
  for (const vote of await bufferedSignals(tx, runId, signal)) {
    await tx.update(signals).set({ waitId }).where(eq(signals.id, vote.id));
    const [decided] = await tx.execute<{ decides: boolean }>(
      sql`select signalbox.cast_vote(${waitId}, ${runId}, ${vote.id}, ${JSON.stringify(quorum)}::jsonb, ${vote.payload}) as decides`,
    );
    if (decided?.decides) {
      await resolveWaits(tx, { ids: [waitId] }, { status: "received", signalId: vote.id });
      return true;
    }
  }
  return false;
}

/** The run's signals of this name kept for a wait (unexpired), oldest first, locked. */
function bufferedSignals(tx: Tx, runId: string, signal: string) {
  return tx
    .select({ id: signals.id, payload: signals.payload })
    .from(signals)
    // A started signal (signal-with-start) and those kept behind it have no TTL (as open_wait.sql).
    .where(
      and(
        eq(signals.runId, runId),
        eq(signals.signal, signal),
        sql`${signals.outcome} in ('buffered', 'started')`, // literal: the partial index signals_kept_open matches it
        isNull(signals.waitId),
        or(isNull(signals.bufferExpiresAt), gt(signals.bufferExpiresAt, sql`now()`)),
      ),
    )
    .orderBy(asc(signals.sequence)) // the order the run's lock accepted them in (as open_wait.sql)
    .for("update") // the retention job skips locked rows: it neither marks these expired nor deletes them meanwhile
    .$dynamic();
}

/** The constraint a Postgres error names (postgres.js puts it on the error drizzle wraps). */
function constraintOf(err: unknown): string | undefined {
  const e = err as { constraint_name?: string; cause?: { constraint_name?: string } };
  return e?.constraint_name ?? e?.cause?.constraint_name;
}
