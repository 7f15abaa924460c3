import { setTimeout as sleep } from "node:timers/promises";
import { sql } from "drizzle-orm";
import type { Deps } from "../deps.ts";
import { withTransaction } from "../db/transaction.ts";
import type { Queryable } from "../db/client.ts";
import { capRejectedSignals } from "../signals/cap-rejections.ts";
import {
  markExpiredSignals,
  purgeEventsWithoutWait,
  purgeOldNotifications,
  purgeOldStarts,
  purgeResolvedWaits,
  purgeSignalsWithoutWait,
  ROW_BATCH,
  WAIT_BATCH,
  type Batch,
  type PurgedWaits,
} from "./retention.queries.ts";

/**
 * One run of the job works this long at most, then hands over to the next run: a shutdown
 * waits for a running job (graphile-worker aborts it only after 5 s), so keep this short.
 */
export const PURGE_BUDGET_MS = 2_000;
/**
 * After each batch the purge rests this many times as long as the batch took (at least
 * MIN_REST_MS): it keeps one connection busy a twenty-first of the time at most, however much
 * is left, so intake keeps its latency while a backlog of millions of rows is worked through
 * (bench --retention: about 900 rows/s on 2 shared cores, 3 million an hour, intake p99 not
 * moved; purges 3 to 40 times as fast, in batches of 100 to 1,000 rows, moved it by 1.4x to
 * 6.9x there, counting the vacuum the deletes bring on).
 */
export const REST_FACTOR = 20;
const MIN_REST_MS = 5;
/**
 * One purge at a time, across processes: each batch takes this advisory lock (transaction-
 * scoped) or the run stands down. Holding it (pg_advisory_lock(hashtext('signalbox:retention')))
 * pauses the purge: bench --retention does, to compare intake with and without it in turns.
 */
export const PURGE_LOCK = "signalbox:retention";

export interface PurgeTotals extends PurgedWaits {
  /** Signal records that belong to no wait (rejections, buffered signals never consumed). */
  looseSignals: number;
  /** History events that belong to no wait (run.*, signal.buffered). */
  looseEvents: number;
  /** Buffered signals past their TTL marked `expired` (not deleted). */
  expired: number;
  /** Run starts (signal-with-start) delivered or failed, with their recorded attempts. */
  runStarts: number;
  /** Rejected signals past SIGNALBOX_REJECTED_PER_SIGNAL_TYPE of their type, oldest first, whatever their age. */
  rejectedOverCap: number;
}

export interface PurgeReport {
  totals: PurgeTotals;
  batches: number;
  /** Rows the largest single batch (one transaction) deleted or marked. */
  largestBatch: number;
  /** True when the budget ran out (or shutdown began) with work possibly left. */
  more: boolean;
  /** True when another session held PURGE_LOCK: this run stood down. */
  busy: boolean;
}

interface Step {
  /** One batch from `from` on: what it did, the key to go on from, and whether it was full (there may be more). */
  run(q: Queryable, from: string | null): Promise<{ done: Partial<PurgeTotals>; last: string | null; full: boolean }>;
}

/** A step over one of the plain batch statements, counted under `name`. */
const plain = (name: keyof PurgeTotals, statement: (q: Queryable, from: string | null) => Promise<Batch>): Step => ({
  async run(q, from) {
    const b = await statement(q, from);
    return { done: { [name]: b.rows }, last: b.last, full: b.rows === ROW_BATCH };
  },
});

/**
 * The retention job's work: marks buffered signals past their TTL `expired`, trims each signal
 * type's rejections to the newest SIGNALBOX_REJECTED_PER_SIGNAL_TYPE, then (unless
 * SIGNALBOX_RETENTION_DAYS is 0) deletes, batch by batch, resolved waits older than the
 * retention period with everything that belongs to them, then history events, signal records
 * and notifications of that age that belong to no wait, and run starts no longer pending. Never touched: open waits, waits
 * whose callback is pending, buffered signals within their TTL, anything younger than the
 * period, and `runs` rows (they hold each run's gapless `last_sequence`).
 */
export async function purgeOldRecords(
  deps: Pick<Deps, "db" | "config" | "log">,
  opts: { abort?: AbortSignal; budgetMs?: number } = {},
): Promise<PurgeReport> {
  const days = deps.config.SIGNALBOX_RETENTION_DAYS;
  const db = deps.db;
  const steps: Step[] = [plain("expired", (q) => markExpiredSignals(q))];
  const cap = deps.config.SIGNALBOX_REJECTED_PER_SIGNAL_TYPE;
  if (cap > 0) {
    steps.push({
      async run(q) {
        const n = await capRejectedSignals(q, cap, ROW_BATCH);
        return { done: { rejectedOverCap: n }, last: null, full: n > 0 };
      },
    });
  }
  if (days > 0) {
    steps.push(
      {
        async run(q, from) {
          const { last, ...done } = await purgeResolvedWaits(q, days, from);
          return { done, last, full: done.waits === WAIT_BATCH };
        },
      },
      plain("looseEvents", (q, from) => purgeEventsWithoutWait(q, days, from)),
      plain("looseSignals", (q, from) => purgeSignalsWithoutWait(q, days, from)),
      plain("notifications", (q, from) => purgeOldNotifications(q, days, from)),
      {
        async run(q, from) {
          const b = await purgeOldStarts(q, days, from);
          return { done: { runStarts: b.rows }, last: b.last, full: b.rows === WAIT_BATCH };
        },
      },
    );
  }

  const report: PurgeReport = {
    totals: { waits: 0, events: 0, signals: 0, notifications: 0, votes: 0, deliveryAttempts: 0, linkUses: 0, looseSignals: 0, looseEvents: 0, expired: 0, runStarts: 0, rejectedOverCap: 0 },
    batches: 0,
    largestBatch: 0,
    more: false,
    busy: false,
  };
  const deadline = Date.now() + (opts.budgetMs ?? PURGE_BUDGET_MS);
  let restMs = 0;
  work: for (const step of steps) {
    let from: string | null = null;
    for (;;) {
      if (restMs > 0) await sleep(restMs, undefined, { signal: opts.abort }).catch(() => {});
      if (opts.abort?.aborted || Date.now() >= deadline) {
        report.more = true;
        break work;
      }
      const started = Date.now();
      const batch = await withTransaction(db, async (tx) => {
        // Not waiting for the disk: a purge lost in a crash is purged again by the next run,
        // and the commits intake waits for are not queued behind ours.
        const [lock] = await tx.execute<{ locked: boolean }>(sql`
          select pg_try_advisory_xact_lock(hashtext(${PURGE_LOCK}::text)) as locked, set_config('synchronous_commit', 'off', true)`);
        return lock?.locked ? step.run(tx, from) : undefined;
      });
      if (!batch) {
        report.more = report.busy = true;
        break work;
      }
      const { done, last, full } = batch;
      from = last ?? from;
      restMs = Math.max(MIN_REST_MS, (Date.now() - started) * REST_FACTOR);
      let rows = 0;
      for (const [k, n] of Object.entries(done) as Array<[keyof PurgeTotals, number]>) {
        report.totals[k] += n;
        rows += n;
      }
      report.batches++;
      report.largestBatch = Math.max(report.largestBatch, rows);
      if (!full) break;
    }
  }
  const touched = Object.values(report.totals).some((n) => n > 0);
  if (touched) deps.log.info({ ...report.totals, batches: report.batches, more: report.more, retentionDays: days }, "retention: purged old records");
  return report;
}
