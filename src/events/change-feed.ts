import { ServiceUnavailableError } from "../core/errors.ts";
import type { Log } from "../core/logger.ts";
import type { Listener } from "../db/listen-connection.ts";
import { keptFor } from "../core/kept-for.ts";

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

export interface HoldOptions {
  /** Read again at least this often, woken or not: a lost NOTIFY then costs at most this long. */
  pollMs?: number;
  /**
   * Past the cap on held requests, answer the value as it is instead of 503 (intake: the
   * signal is accepted already, and a 503 would tell its sender to send it again).
   */
  answerWhenFull?: boolean;
}

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
  #sql: Listener | undefined;
  readonly #probes = new Map<string, () => void>();

  async listen(sql: Listener, log: Log, safetyPollMs = 10_000): Promise<void> {
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
    const set = keptFor(this.#waiters, topic, () => new Set());
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
   * Holds until `done` says so of the value `read` produced, `topics` has no change left to wait
   * for within `waitMs`, or `signal` aborts; returns the last value `read` produced.
   *
   * `topics` may depend on what was read (a signal's reply is watched on its run until a wait
   * takes it, then on that wait): when a read names a topic not watched during it, it is
   * registered and read again at once, so no wake-up falls between the two.
   */
  async hold<T>(
    topics: Topic | ((latest: T | undefined) => Topic[]),
    waitMs: number,
    signal: AbortSignal,
    read: () => Promise<T>,
    done: (value: T) => boolean,
    opts: HoldOptions = {},
  ): Promise<T> {
    const topicsOf = typeof topics === "function" ? topics : () => [topics];
    const deadline = Date.now() + waitMs;
    let release: (() => void) | undefined; // taken once the request is to be held, not for an answer at once
    let latest: T | undefined;
    try {
      for (;;) {
        const watching = topicsOf(latest);
        const watches = watching.map((t) => this.watch(t, signal)); // register before reading: no lost wake-up
        try {
          const value = (latest = await read());
          const remaining = deadline - Date.now();
          if (done(value) || signal.aborted || remaining <= 0) return value;
          if (topicsOf(value).some((t) => !watching.includes(t))) continue;
          if (!release) {
            try {
              release = this.admit();
            } catch (err) {
              if (opts.answerWhenFull && err instanceof ServiceUnavailableError) return value;
              throw err;
            }
          }
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([...watches.map((w) => w.changed), new Promise<void>((r) => (timer = setTimeout(r, Math.min(remaining, opts.pollMs ?? remaining))))]);
          clearTimeout(timer);
        } finally {
          for (const w of watches) w.stop();
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
    // The time limit covers sending the NOTIFY too: a database that stopped answering (a host
    // gone silent, not a closed connection) must not hold /readyz.
    const heard = new Promise<boolean>((resolve) => {
      this.#probes.set(nonce, () => resolve(true));
      timer = setTimeout(() => resolve(false), timeoutMs);
      sql.notify(PROBE_CHANNEL, nonce).catch(() => resolve(false));
    });
    try {
      return await heard;
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
