import { setTimeout as sleep } from "node:timers/promises";
import { retryingRollbacks, type Deps } from "../core/context.ts";
import {
  markExpiredSignals,
  purgeEventsWithoutWait,
  purgeOldNotifications,
  purgeResolvedWaits,
  purgeSignalsWithoutWait,
  ROW_BATCH,
  WAIT_BATCH,
  type PurgedWaits,
} from "./retention.queries.ts";

/** One run of the job works this long at most, then hands over to the next run (and to shutdown). */
export const PURGE_BUDGET_MS = 5_000;
/**
 * After each batch the purge rests this many times as long as the batch took (at least
 * MIN_REST_MS): it keeps at most a third of one connection busy, however much is left, so
 * intake keeps its latency while a backlog of millions of rows is worked through.
 */
export const REST_FACTOR = 2;
const MIN_REST_MS = 5;

export interface PurgeTotals extends PurgedWaits {
  /** Signal records that belong to no wait (rejections, buffered signals never consumed). */
  looseSignals: number;
  /** History events that belong to no wait (run.*, signal.buffered). */
  looseEvents: number;
  /** Buffered signals past their TTL marked `expired` (not deleted). */
  expired: number;
}

export interface PurgeReport {
  totals: PurgeTotals;
  batches: number;
  /** Rows the largest single batch (one transaction) deleted or marked. */
  largestBatch: number;
  /** True when the budget ran out (or shutdown began) with work possibly left. */
  more: boolean;
}

interface Step {
  run(): Promise<Partial<PurgeTotals>>;
  /** Whether the batch was full, so there may be more. */
  full(done: Partial<PurgeTotals>): boolean;
}

/**
 * The retention job's work: marks buffered signals past their TTL `expired`, then (unless
 * SIGNALBOX_RETENTION_DAYS is 0) deletes, batch by batch, resolved waits older than the
 * retention period with everything that belongs to them, then history events, signal records
 * and notifications of that age that belong to no wait. Never touched: open waits, waits
 * whose callback is pending, buffered signals within their TTL, anything younger than the
 * period, and `runs` rows (they hold each run's gapless `last_sequence`).
 */
export async function purgeOldRecords(
  deps: Pick<Deps, "db" | "config" | "log">,
  opts: { abort?: AbortSignal; budgetMs?: number } = {},
): Promise<PurgeReport> {
  const days = deps.config.SIGNALBOX_RETENTION_DAYS;
  const db = deps.db;
  const steps: Step[] = [
    { run: async () => ({ expired: await markExpiredSignals(db) }), full: (d) => d.expired === ROW_BATCH },
  ];
  if (days > 0) {
    steps.push(
      { run: () => purgeResolvedWaits(db, days), full: (d) => d.waits === WAIT_BATCH },
      { run: async () => ({ looseEvents: await purgeEventsWithoutWait(db, days) }), full: (d) => d.looseEvents === ROW_BATCH },
      { run: async () => ({ looseSignals: await purgeSignalsWithoutWait(db, days) }), full: (d) => d.looseSignals === ROW_BATCH },
      { run: async () => ({ notifications: await purgeOldNotifications(db, days) }), full: (d) => d.notifications === ROW_BATCH },
    );
  }

  const report: PurgeReport = {
    totals: { waits: 0, events: 0, signals: 0, notifications: 0, votes: 0, linkUses: 0, looseSignals: 0, looseEvents: 0, expired: 0 },
    batches: 0,
    largestBatch: 0,
    more: false,
  };
  const deadline = Date.now() + (opts.budgetMs ?? PURGE_BUDGET_MS);
  let restMs = 0;
  work: for (const step of steps) {
    for (;;) {
      if (restMs > 0) await sleep(restMs, undefined, { signal: opts.abort }).catch(() => {});
      if (opts.abort?.aborted || Date.now() >= deadline) {
        report.more = true;
        break work;
      }
      const started = Date.now();
      const done = await retryingRollbacks(() => step.run());
      restMs = Math.max(MIN_REST_MS, (Date.now() - started) * REST_FACTOR);
      let rows = 0;
      for (const [k, n] of Object.entries(done) as Array<[keyof PurgeTotals, number]>) {
        report.totals[k] += n;
        rows += n;
      }
      report.batches++;
      report.largestBatch = Math.max(report.largestBatch, rows);
      if (!step.full(done)) break;
    }
  }
  const touched = Object.values(report.totals).some((n) => n > 0);
  if (touched) deps.log.info({ ...report.totals, batches: report.batches, more: report.more, retentionDays: days }, "retention: purged old records");
  return report;
}
