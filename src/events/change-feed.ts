import type postgres from "postgres";
import { ServiceUnavailableError } from "../core/errors.ts";
import type { Log } from "../core/logger.ts";

/**
 * NOTIFY channels, sent inside the changing transaction. A run's payload is its id; a wait's is
 * the ids of the waits that changed, comma-separated (one NOTIFY per 200 waits resolved at once:
 * db/functions/resolve_waits.sql).
 */
export const WAIT_CHANGED_CHANNEL = "signalbox_wait_changed";
export const RUN_CHANGED_CHANNEL = "signalbox_run_changed"; // by a trigger on every history event

/** NOTIFYs this process sends itself to see that its LISTEN connection is up (see `listening`). */
const PROBE_CHANNEL = "signalbox_feed_probe";

export type Topic = `wait:${string}` | `run:${string}`;

/**
 * Wakes long-polls, checkpoints and event streams when what they watch changes, in this process
 * or any other sharing the database: one LISTEN connection per process fans NOTIFYs out to
 * in-memory waiters. No pool connection is held while a client waits. Waiters always re-read
 * state after waking, so a spurious wake-up is harmless; the safety poll and every reconnect
 * wake everyone, covering notifications lost while the LISTEN connection was down.
 */
export class ChangeFeed {
  readonly #waiters = new Map<Topic, Set<() => void>>();
  /** Requests held open (long-polls, checkpoints, event streams) at most, and now. */
  readonly #maxHeld: number;
  #held = 0;

  constructor(opts: { maxHeld?: number } = {}) {
    this.#maxHeld = opts.maxHeld ?? Infinity;
  }

  /**
   * A place for one request held open; returns its release. Past the cap, 503 with Retry-After:
   * each held request costs memory and a socket, and a client holding thousands would take
   * them from everyone else.
   */
  admit(): () => void {
    if (this.#held >= this.#maxHeld) throw new ServiceUnavailableError(`${this.#maxHeld} requests are held open already (SIGNALBOX_MAX_HELD_REQUESTS); retry shortly`, 1);
    this.#held++;
    let released = false;
    return () => {
      if (!released) this.#held--;
      released = true;
    };
  }

  /** Requests held open now. */
  get held(): number {
    return this.#held;
  }
  #unlisten: Array<() => Promise<void>> = [];
  #safetyPoll: NodeJS.Timeout | undefined;
  #sql: postgres.Sql | undefined;
  readonly #probes = new Map<string, () => void>();

  async listen(sql: postgres.Sql, log: Log, safetyPollMs = 10_000): Promise<void> {
    this.#sql = sql;
    // postgres.js listens again on a new connection after the old one dropped; NOTIFYs sent in
    // between are lost, so every waiter re-reads then.
    const onReconnect = () => this.wakeAll();
    const subs = await Promise.all([
      sql.listen(WAIT_CHANGED_CHANNEL, (ids) => ids.split(",").forEach((id) => this.wake(`wait:${id}`)), onReconnect),
      sql.listen(RUN_CHANGED_CHANNEL, (id) => this.wake(`run:${id}`), onReconnect),
      sql.listen(PROBE_CHANNEL, (nonce) => this.#probes.get(nonce)?.()),
    ]);
    this.#unlisten = subs.map((s) => s.unlisten);
    this.#safetyPoll = setInterval(() => this.wakeAll(), safetyPollMs);
    this.#safetyPoll.unref();
    log.debug("listening for changes");
  }

  /** Resolves when `topic` may have changed, or on `signal` abort. Register before reading state. */
  watch(topic: Topic, signal: AbortSignal): { changed: Promise<void>; stop(): void } {
    let wake!: () => void;
    const changed = new Promise<void>((resolve) => (wake = resolve));
    let set = this.#waiters.get(topic);
    if (!set) this.#waiters.set(topic, (set = new Set()));
    set.add(wake);
    const onAbort = () => wake();
    signal.addEventListener("abort", onAbort, { once: true });
    const stop = () => {
      signal.removeEventListener("abort", onAbort);
      set.delete(wake);
      if (set.size === 0 && this.#waiters.get(topic) === set) this.#waiters.delete(topic);
    };
    return { changed, stop };
  }

  /**
   * Holds until `check` returns a value, `topic` has no change left to wait for within
   * `waitMs`, or `signal` aborts; returns the last value `read` produced.
   */
  async hold<T>(topic: Topic, waitMs: number, signal: AbortSignal, read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
    const deadline = Date.now() + waitMs;
    let release: (() => void) | undefined; // taken once the request is to be held, not for an answer at once
    try {
      for (;;) {
        const watch = this.watch(topic, signal); // register before reading: no lost wake-up
        try {
          const value = await read();
          const remaining = deadline - Date.now();
          if (done(value) || signal.aborted || remaining <= 0) return value;
          release ??= this.admit();
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([watch.changed, new Promise<void>((r) => (timer = setTimeout(r, remaining)))]);
          clearTimeout(timer);
        } finally {
          watch.stop();
        }
      }
    } finally {
      release?.();
    }
  }

  /**
   * Whether the LISTEN connection delivers: sends this process a NOTIFY and waits up to
   * `timeoutMs` for it. False before `listen`, while the database is away, or while postgres.js
   * has not listened again yet; waiters are woken then, since they may have missed changes.
   */
  async listening(timeoutMs = 1000): Promise<boolean> {
    const sql = this.#sql;
    if (!sql) return false;
    const nonce = Math.random().toString(36).slice(2);
    let timer: NodeJS.Timeout | undefined;
    const heard = new Promise<boolean>((resolve) => {
      this.#probes.set(nonce, () => resolve(true));
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      await sql.notify(PROBE_CHANNEL, nonce);
      return await heard;
    } catch {
      return false;
    } finally {
      clearTimeout(timer);
      this.#probes.delete(nonce);
    }
  }

  wake(topic: Topic): void {
    for (const wake of this.#waiters.get(topic) ?? []) wake();
  }

  wakeAll(): void {
    for (const set of this.#waiters.values()) for (const wake of set) wake();
  }

  /** How many waiters are registered (for tests and metrics). */
  get size(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  async close(): Promise<void> {
    clearInterval(this.#safetyPoll);
    this.wakeAll();
    await Promise.all(this.#unlisten.map((u) => u().catch(() => {})));
  }
}
