import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import type { CallbackJob } from "../jobs/callback-hand-off.ts";
import type { NewSignal } from "./signals.queries.ts";
import { keptFor } from "../core/kept-for.ts";

/** One authenticated, validated signal for signalbox.accept_signals. */
export type IntakeItem = Omit<NewSignal, "outcome" | "waitId" | "validationErrors" | "bufferTtlS"> & {
  bufferTtlS: number;
  /** Approval links: only this wait counts as the run's open one, and the signal is never buffered. */
  expectWaitId?: string;
  /** The type's start URL (signal-with-start); null for a type without one, which then costs intake nothing more. */
  startUrl?: string | null;
};

/**
 * What `signalbox.accept_signals` answered for one item. `runId` is the run it was applied to:
 * the run addressed, or the newest run of its chain when that run was continued.
 */
export type IntakeItemAnswer =
  | { outcome: "received" | "buffered" | "started" | "duplicate"; signalId: string; sequence: number; waitId: string | null; runId: string }
  | { outcome: "rejected_idempotency_conflict" | "rejected_not_active" | "rejected_not_waiting"; signalId: string; runId: string };

/**
 * Takes signals in (db/functions/accept_signals.sql, the only implementation of intake): each
 * is recorded under its run's lock and resolves, buffers or is rejected; answers in the order
 * given. One statement; the caller's transaction, or its own.
 */
export async function acceptSignals(q: Queryable, items: IntakeItem[]): Promise<IntakeItemAnswer[]> {
  return (await accept(q, items, null)).answers;
}

/**
 * acceptSignals, with the callbacks of the waits it receives handed off: enqueued due `dueInS`
 * from now, and returned for the caller to run once this has committed (CallbackHandOff).
 */
export function acceptSignalsHandingOff(q: Queryable, items: IntakeItem[], dueInS: number): Promise<{ answers: IntakeItemAnswer[]; callbackJobs: CallbackJob[] }> {
  return accept(q, items, dueInS);
}

async function accept(q: Queryable, items: IntakeItem[], handOffS: number | null) {
  const json = JSON.stringify(
    items.map((s, i) => ({
      i,
      id: s.id,
      run_id: s.runId,
      signal: s.signal,
      payload: s.payload,
      payload_hash: s.payloadHash,
      idempotency_key: s.idempotencyKey,
      buffer_ttl_s: s.bufferTtlS,
      expect_wait_id: s.expectWaitId ?? null,
      start_url: s.startUrl ?? null,
    })),
  );
  const rows = await q.execute<Row>(sql`select * from signalbox.accept_signals(${json}::json, ${handOffS}::double precision)`);
  const answers: Array<IntakeItemAnswer | undefined> = items.map(() => undefined);
  const jobs = new Map<string, { waitIds: string[]; read: unknown[] }>();
  let answered = 0;
  for (const r of rows) {
    if (r.answer === "callback_job") {
      const job = keptFor(jobs, String(r.answer_job), () => ({ waitIds: [], read: [] }));
      job.waitIds.push(r.answer_wait_id!);
      job.read.push(r.answer_callback);
    } else {
      answers[r.item!] = toAnswer(r);
      answered++;
    }
  }
  if (answered !== items.length || answers.some((a) => a === undefined)) throw new Error("accept_signals: missing answers");
  return { answers: answers as IntakeItemAnswer[], callbackJobs: [...jobs].map(([id, job]) => ({ id, ...job })) };
}

type Row = Record<string, unknown> & {
  /** Null on a handed-off callback's row (answer "callback_job"). */
  item: number | null;
  answer: string;
  answer_signal_id: string | null;
  answer_sequence: number | string | null;
  answer_wait_id: string | null;
  /** Null on a handed-off callback's row (as answer_job is on an item's). */
  answer_run_id: string | null;
  answer_job: number | string | null;
  /** A handed-off callback's: what it carries (signalbox.receive_handing_off). */
  answer_callback: unknown;
};

function toAnswer(r: Row): IntakeItemAnswer {
  switch (r.answer) {
    case "received":
    case "buffered":
    case "started":
    case "duplicate":
      return { outcome: r.answer, signalId: r.answer_signal_id!, sequence: Number(r.answer_sequence), waitId: r.answer_wait_id, runId: r.answer_run_id! };
    case "rejected_idempotency_conflict":
    case "rejected_not_active":
    case "rejected_not_waiting":
      return { outcome: r.answer, signalId: r.answer_signal_id!, runId: r.answer_run_id! };
    default:
      throw new Error(`accept_signals: unknown answer ${r.answer}`);
  }
}
