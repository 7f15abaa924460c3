import { and, asc, eq, gt, isNull, sql } from "drizzle-orm";
import { withTransaction, type Deps } from "../core/context.ts";
import { ConflictError, NotFoundError } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import type { Tx } from "../db/client.ts";
import { signals, waits } from "../db/schema.ts";
import { recordEvent } from "../events/events.queries.ts";
import { addJob, jobKeys } from "../jobs/enqueue.ts";
import { lockRun } from "../runs/runs.queries.ts";
import { findSignalType } from "../signal-types/signal-types.queries.ts";
import { resolveWaits } from "./resolve-waits.ts";
import { toWaitResource, type WaitResource } from "./wait-view.ts";
import { findWait, findWaitByKey, hasOpenWait } from "./waits.queries.ts";

export interface OpenWaitInput {
  runId: string;
  signal: string;
  key?: string;
  timeoutS?: number;
  timeoutAt?: Date;
  callbackUrl?: string;
  metadata?: Record<string, unknown>;
}

/**
 * Opens a wait, atomically with its timeout job. A signal buffered for this run and name is
 * consumed at once (oldest first), so the new wait may already be `received`.
 */
export async function openWait(deps: Pick<Deps, "db">, input: OpenWaitInput): Promise<{ wait: WaitResource; created: boolean }> {
  if (!(await findSignalType(deps.db, input.signal))) throw new NotFoundError(`no signal type named '${input.signal}'`);
  return withTransaction(deps.db, async (tx) => {
    const run = await lockRun(tx, input.runId);
    if (input.key !== undefined) {
      const existing = await findWaitByKey(tx, input.runId, input.key);
      if (existing) {
        if (existing.signal !== input.signal) {
          throw new ConflictError(`key '${input.key}' already names a wait for signal '${existing.signal}' in this run`);
        }
        return { wait: toWaitResource(existing), created: false };
      }
    }
    if (run.status === "cancelled") throw new ConflictError(`run '${input.runId}' is cancelled`);
    if (await hasOpenWait(tx, input.runId, input.signal)) {
      throw new ConflictError(`run '${input.runId}' already has an open wait for signal '${input.signal}'`);
    }
    const id = newId("wt");
    const [wait] = await tx
      .insert(waits)
      .values({
        id,
        runId: input.runId,
        signal: input.signal,
        key: input.key ?? null,
        timeoutAt: deadline(input),
        callbackUrl: input.callbackUrl ?? null,
        metadata: input.metadata ?? {},
      })
      .returning({ timeoutAt: waits.timeoutAt, overdue: sql<boolean>`${waits.timeoutAt} <= now()` });
    await recordEvent(tx, { runId: input.runId, type: "signal.waiting", waitId: id, data: { signal: input.signal } });

    if (!(await consumeBufferedSignal(tx, input.runId, input.signal, id)) && wait!.timeoutAt) {
      if (wait!.overdue) {
        await resolveWaits(tx, sql`id = ${id}::text`, { status: "timed_out", event: "signal.timeout" });
      } else {
        await addJob(tx, "expire_wait", { id }, { runAt: sql`${wait!.timeoutAt.toISOString()}::timestamptz`, jobKey: jobKeys.expire(id) });
      }
    }
    return { wait: toWaitResource((await findWait(tx, id))!), created: true };
  });
}

/** Deadlines are computed on the database clock, like the timeout job that enforces them. */
function deadline(input: OpenWaitInput) {
  if (input.timeoutAt) return input.timeoutAt;
  if (input.timeoutS !== undefined) return sql`now() + ${input.timeoutS}::double precision * interval '1 second'`;
  return null;
}

async function consumeBufferedSignal(tx: Tx, runId: string, signal: string, waitId: string): Promise<boolean> {
  const [buffered] = await tx
    .select({ id: signals.id })
    .from(signals)
    .where(
      and(
        eq(signals.runId, runId),
        eq(signals.signal, signal),
        eq(signals.outcome, "buffered"),
        isNull(signals.waitId),
        gt(signals.bufferExpiresAt, sql`now()`),
      ),
    )
    .orderBy(asc(signals.receivedAt), asc(signals.sequence))
    .limit(1);
  if (!buffered) return false;
  await tx.update(signals).set({ waitId }).where(eq(signals.id, buffered.id));
  await resolveWaits(tx, sql`id = ${waitId}::text`, { status: "received", event: "signal.received", signalId: buffered.id });
  return true;
}
