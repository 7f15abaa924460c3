import { ServiceError, NotFoundError } from "../core/errors.ts";
import type { Db } from "../db/client.ts";
import { pgCode, withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { findRedriveOf, forOneWait, lockRedriveSource, markRedriven, type RedriveSource } from "./redrive.queries.ts";
import { sendSignal } from "./send-signal.ts";
import type { IntakeAnswer } from "./signal-outcome.ts";

/**
 * The dead letters a redrive takes: no open wait then, a buffered signal whose TTL passed, and a
 * payload that broke the schema (it is checked against the type's current schema again, so a
 * corrected schema lets it through). Other rejections would only be rejected again: a cancelled
 * run stays cancelled, a conflicting key still conflicts.
 */
export const REDRIVABLE_OUTCOMES = ["rejected_not_waiting", "expired", "rejected_invalid_payload"] as const;
export type RedrivableOutcome = (typeof REDRIVABLE_OUTCOMES)[number];

/** The intake answer of the new attempt, naming the record it sent again. */
export type RedriveAnswer = IntakeAnswer & { redriven_from: string };

/** Refusals of the redrive itself (nothing was sent); titles in intake's snake_case, as `outcome`s are. */
export class AlreadyRedrivenError extends ServiceError {
  constructor(id: string, redrivenAs: string) {
    super(409, "already_redriven", `signal '${id}' was already redriven, as '${redrivenAs}'`, { redriven_as: redrivenAs });
  }
}
export class NotRedrivableError extends ServiceError {
  constructor(id: string, outcome: string) {
    super(409, "not_redrivable", `signal '${id}' is '${outcome}': only ${REDRIVABLE_OUTCOMES.join(", ")} signals can be redriven`, { signal_outcome: outcome });
  }
}
export class AnswerForOneWaitError extends ServiceError {
  constructor(id: string) {
    super(409, "not_redrivable", `signal '${id}' answered one wait (an approval link, or an operator in the console), which has ended: sent again it would answer another`);
  }
}
export class PayloadNotKeptError extends ServiceError {
  constructor(s: RedriveSource) {
    const why =
      s.payloadBytes !== null
        ? `its payload (${s.payloadBytes} bytes) was larger than a rejection keeps (4,096 bytes): only its size and digest were kept`
        : "its payload was not kept (it could not be parsed)";
    super(422, "payload_not_kept", `signal '${s.id}' cannot be redriven: ${why}`, { payload_bytes: s.payloadBytes });
  }
}

export type RedriveDeps = Pick<Deps, "db" | "secretBox" | "signalTypeCache"> & Partial<Pick<Deps, "config" | "metrics" | "callbackHandOff">>;

/**
 * Sends a dead letter's stored payload again to its run and signal name, through intake like any
 * signal, and answers what intake answered. Signatures are not checked again: the record exists
 * only because its sender was authenticated when it first came, and the caller holds a management
 * token. The payload is validated against the type's current schema.
 *
 * Everything happens in one transaction holding the original record's row lock, so a signal is
 * redriven at most once: a concurrent second redrive waits, then finds the first's record
 * (redriven_from, unique) and is refused. The new record and its redriven_from commit together.
 */
export async function redriveSignal(deps: RedriveDeps, signalId: string): Promise<RedriveAnswer> {
  try {
    const outcome = await withTransaction(deps.db, async (tx) => {
      const source = await lockRedriveSource(tx, signalId);
      if (!source) throw new NotFoundError(`no signal '${signalId}'`);
      const redrivenAs = await findRedriveOf(tx, signalId);
      if (redrivenAs !== undefined) throw new AlreadyRedrivenError(signalId, redrivenAs);
      if (!(REDRIVABLE_OUTCOMES as readonly string[]).includes(source.outcome)) throw new NotRedrivableError(signalId, source.outcome);
      if (forOneWait(source.idempotencyKey)) throw new AnswerForOneWaitError(signalId);
      if (source.payload === null) throw new PayloadNotKeptError(source);

      // Intake in this transaction (drizzle nests its own as a savepoint): whatever it records,
      // rejections included, commits with the mark below or not at all.
      const answer = await sendSignal(
        { ...deps, db: tx as unknown as Db },
        {
          runId: source.runId,
          signal: source.signal,
          body: Buffer.from(source.payload, "utf8"),
          // The sender's key goes with its payload: a retry of theirs that got through since is a
          // `duplicate` (nothing sent twice). An expired signal keeps its key (its record still
          // answers retries), so its copy is sent without one.
          ...(source.idempotencyKey !== null && source.outcome !== "expired" ? { idempotencyKey: source.idempotencyKey } : {}),
          credentials: { management: true, headers: () => [], nowSeconds: Math.floor(Date.now() / 1000) },
          // A claim makes intake run here, in this transaction, not in a batch of its own.
          claim: async () => {},
        },
      );
      // A duplicate records nothing new (it repeats the accepted signal's answer): nothing to mark.
      if (answer.outcome !== "duplicate" && answer.signal_id !== undefined) await markRedriven(tx, answer.signal_id, signalId);
      return { answer: { ...answer, redriven_from: signalId }, signal: source.signal };
    });
    // Counted as intake is (the type's name is declared: it was recorded under it).
    deps.metrics?.signals.inc({ signal: outcome.answer.outcome === "rejected_unknown_signal" ? "(unknown)" : outcome.signal, outcome: outcome.answer.outcome });
    return outcome.answer;
  } catch (err) {
    // The unique index is the fact; the row lock above makes reaching it this way unexpected.
    if (pgCode(err) === "23505") {
      const redrivenAs = await findRedriveOf(deps.db, signalId);
      if (redrivenAs !== undefined) throw new AlreadyRedrivenError(signalId, redrivenAs);
    }
    throw err;
  }
}
