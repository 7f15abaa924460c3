import { pgCode, retryingRollbacks } from "../db/transaction.ts";
import type { Db } from "../db/client.ts";
import type { Metrics } from "../core/metrics.ts";
import type { CallbackHandOff } from "../jobs/callback-hand-off.ts";
import { acceptSignals, acceptSignalsHandingOff, type IntakeItem, type IntakeItemAnswer } from "./accept-signals.ts";
import { keptFor } from "../core/kept-for.ts";

export type BatchItem = IntakeItem;
export type BatchAnswer = IntakeItemAnswer;

interface Queued {
  item: BatchItem;
  resolve: (a: BatchAnswer) => void;
  reject: (e: unknown) => void;
}

/** Payload text per batch (large bodies go in smaller batches; one statement carries them all). */
const MAX_BATCH_BYTES = 4 * 1024 * 1024;

/**
 * A batch in flight longer than this (a run lock held elsewhere, a slow commit) lets the signals
 * queued behind it go beside it, in a free slot.
 */
const STALL_MS = 20;

/**
 * Group commit for intake. Signals go to Postgres together: one statement
 * (`signalbox.accept_signals`) and one commit for all of them, instead of seven round trips and
 * a commit each. Under light load a batch is one signal sent at once, so nothing waits for a
 * timer. Under load one batch is in flight at a time and the signals arriving meanwhile go
 * together when it commits: each batch costs Postgres a commit, a NOTIFY and its job removals
 * whatever its size, so fewer, larger batches cost less CPU per signal (2 cores, 16 senders:
 * 0.52 ms a signal with one batch at a time, 0.73 ms with up to four smaller ones at once).
 * Another batch goes beside the one in flight, up to `slots`, only when waiting would not pay:
 * a full batch is queued, or the queue has waited `stallMs` (a batch stuck behind one run's
 * lock must not hold up every other run). Every signal is answered only after its batch has
 * committed.
 */
export class IntakeBatcher {
  readonly #db: Db;
  readonly #slots: number;
  readonly #maxBatch: number;
  readonly #stallMs: number;
  readonly #metrics: Metrics | undefined;
  readonly #handOff: CallbackHandOff | undefined;
  #queue: Queued[] = [];
  #inFlight = 0;
  #stall: NodeJS.Timeout | undefined;
  #stalled = false;

  constructor(db: Db, opts: { slots?: number; maxBatch?: number; stallMs?: number; metrics?: Metrics; handOff?: CallbackHandOff } = {}) {
    this.#db = db;
    this.#metrics = opts.metrics;
    this.#handOff = opts.handOff;
    this.#slots = opts.slots ?? 4;
    this.#maxBatch = opts.maxBatch ?? 64;
    this.#stallMs = opts.stallMs ?? STALL_MS;
  }

  accept(item: BatchItem): Promise<BatchAnswer> {
    return new Promise((resolve, reject) => {
      this.#queue.push({ item, resolve, reject });
      this.#pump();
    });
  }

  #pump() {
    while (this.#inFlight < this.#slots && this.#queue.length > 0 && (this.#inFlight === 0 || this.#stalled || this.#queue.length >= this.#maxBatch)) {
      this.#stalled = false;
      clearTimeout(this.#stall); // what stays queued waits stallMs from now
      this.#stall = undefined;
      const batch = this.#queue.splice(0, this.#batchLength());
      this.#inFlight++;
      void this.#run(batch).finally(() => {
        this.#inFlight--;
        this.#pump();
      });
    }
    this.#watchStall();
  }

  /** Signals left queued behind a batch in flight, with a slot free: after stallMs they may go beside it. */
  #watchStall() {
    if (this.#queue.length > 0 && this.#inFlight < this.#slots && this.#stall === undefined) {
      this.#stall = setTimeout(() => {
        this.#stall = undefined;
        this.#stalled = true;
        this.#pump();
      }, this.#stallMs).unref();
    }
  }

  /** How many queued signals the next batch takes: up to maxBatch, and about MAX_BATCH_BYTES of payload (at least one). */
  #batchLength(): number {
    let bytes = 0;
    let n = 0;
    while (n < this.#queue.length && n < this.#maxBatch) {
      bytes += this.#queue[n]!.item.payload?.length ?? 0;
      if (n > 0 && bytes > MAX_BATCH_BYTES) break;
      n++;
    }
    return n;
  }

  async #run(batch: Queued[]): Promise<void> {
    try {
      const answers = await this.#send(batch.map((q) => q.item));
      this.#metrics?.intakeBatchSize.observe(batch.length);
      batch.forEach((q, i) => q.resolve(answers[i]!));
    } catch (err) {
      // A statement's error rolled the batch back: one bad signal must not fail its neighbours,
      // so each goes again on its own. Otherwise (the connection broke) the batch may have
      // committed, and sending it again could record it twice: fail them all.
      if (batch.length === 1 || !rolledBackByStatement(err)) return batch.forEach((q) => q.reject(err));
      await Promise.all(batch.map((q) => this.#run([q])));
    }
  }

  /**
   * One statement, one transaction; retried whole on a serialization failure or deadlock. The
   * callbacks of the waits it received go to this process's delivery engine once it committed
   * (handed off), while it has room for them; otherwise their jobs are due now, for the workers.
   */
  async #send(items: BatchItem[]): Promise<BatchAnswer[]> {
    const handOff = this.#handOff?.hasRoom() ? this.#handOff : undefined;
    if (!handOff) return retryingRollbacks(() => acceptSignals(this.#db, items));
    const { answers, callbackJobs } = await retryingRollbacks(() => acceptSignalsHandingOff(this.#db, items, handOff.dueInS));
    if (callbackJobs.length > 0) handOff.take(callbackJobs);
    return answers;
  }
}

/**
 * Whether Postgres answered the batch's statement with an error (severity ERROR, with its
 * SQLSTATE), which rolled it back. Not a socket's error: Node's codes (EPIPE) are five letters
 * too, and the batch may have committed before the connection broke.
 */
function rolledBackByStatement(err: unknown): boolean {
  for (let e = err, i = 0; i < 3 && e && typeof e === "object"; e = (e as { cause?: unknown }).cause, i++) {
    if ((e as { severity?: unknown }).severity === "ERROR" && pgCode(e) !== undefined) return true;
  }
  return false;
}

const batchers = new WeakMap<Db, IntakeBatcher>();

/**
 * The batcher of this database handle. Its batches use at most half the pool's connections,
 * leaving the rest to waits, reads and deliveries.
 */
export function intakeBatcherFor(db: Db, poolSize: number, metrics?: Metrics, handOff?: CallbackHandOff): IntakeBatcher {
  return keptFor(batchers, db, () => new IntakeBatcher(db, { metrics, handOff, slots: Math.max(1, Math.floor(poolSize / 2)) }));
}
