import { sql } from "drizzle-orm";
import { openDatabase, type Database, type Db } from "./client.ts";

/**
 * Node socket errors and postgres.js's own codes for a connection that failed or went away.
 * ENOENT: no socket file where a Unix-socket URL points (a stopped Postgres removes it).
 */
const CONNECTION_CODES = new Set([
  "ENOENT", "ECONNREFUSED", "ECONNRESET", "ECONNABORTED", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENETDOWN", "ENOTFOUND", "EAI_AGAIN",
  "CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED", "CONNECT_TIMEOUT",
]);
/**
 * SQLSTATEs meaning "this server or connection cannot serve you now", never "your request is
 * wrong": class 08 (connection exception), 57P01-57P05 (admin/crash shutdown, cannot connect
 * now, idle session timeout), 53300 (too many connections), 25P03 (idle in transaction timeout).
 */
const UNAVAILABLE_STATES = new Set(["57P01", "57P02", "57P03", "57P04", "57P05", "53300", "25P03"]);
/** Among those, the ones that say a new connection would fail too (not just this one was dropped). */
const UNREACHABLE_CODES = new Set(["ENOENT", "ECONNREFUSED", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENETDOWN", "ENOTFOUND", "EAI_AGAIN", "CONNECT_TIMEOUT", "57P03", "53300"]);

function codesOf(err: unknown): string[] {
  const codes: string[] = [];
  let e: unknown = err;
  for (let i = 0; i < 5 && e && typeof e === "object"; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
    // node-postgres (graphile-worker's pool) says it in words only.
    const message = (e as { message?: unknown }).message;
    if (typeof message === "string" && /^Connection terminated|timeout exceeded when trying to connect/.test(message)) codes.push("CONNECTION_CLOSED");
    e = (e as { cause?: unknown }).cause;
  }
  return codes;
}

/** The database could not be reached or dropped the connection: the request may succeed later. */
export function isDatabaseUnavailable(err: unknown): boolean {
  return codesOf(err).some((c) => CONNECTION_CODES.has(c) || c.startsWith("08") || UNAVAILABLE_STATES.has(c));
}

/**
 * Tracks whether the database is reachable, so requests fail fast (503) while it is not instead
 * of queueing for a connection. A failure that says new connections fail too marks it down; a
 * probe every `probeMs` marks it up again (and calls `onRecovered`). Requests do not wait for it.
 */
export class DatabaseAvailability {
  #down = false;
  #since = 0;
  #probe: NodeJS.Timeout | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #closed = false;
  /** Called once when the database is next marked down (requests waiting on it); each removed when its request ends. */
  readonly #onDown = new Set<() => void>();
  readonly #db: Db;
  readonly #probeMs: number;
  readonly #listeners: Array<(up: boolean) => void> = [];

  constructor(db: Db, opts: { probeMs?: number } = {}) {
    this.#db = db;
    this.#probeMs = opts.probeMs ?? 250;
  }

  /**
   * Calls `fn` once, when the database is next marked down; returns what stops that (a request
   * that ended calls it, so nothing is kept for it).
   */
  whenDown(fn: () => void): () => void {
    this.#onDown.add(fn);
    return () => this.#onDown.delete(fn);
  }

  /**
   * Asks `answers` (on a connection of its own: a busy pool is no sign) every `everyMs`
   * whether the database answers within its time. No error tells of a database that stopped
   * answering with its connections left open (a host gone silent, frozen, cut off by a
   * network): this does, and marks it down.
   */
  watch(answers: () => Promise<boolean>, everyMs: number): void {
    let asking = false;
    this.#heartbeat = setInterval(() => {
      if (asking || this.#down || this.#closed) return;
      asking = true;
      void answers()
        .then((ok) => {
          if (!ok) this.markDown();
        })
        .finally(() => (asking = false));
    }, everyMs);
    this.#heartbeat.unref();
  }

  get up(): boolean {
    return !this.#down;
  }

  /** Milliseconds since the database was marked down (0 while up). */
  get downForMs(): number {
    return this.#down ? Date.now() - this.#since : 0;
  }

  onChange(listener: (up: boolean) => void): void {
    this.#listeners.push(listener);
  }

  /** Called with any error a query raised; returns whether it was a connection-level failure. */
  observe(err: unknown): boolean {
    if (!isDatabaseUnavailable(err)) return false;
    if (codesOf(err).some((c) => UNREACHABLE_CODES.has(c))) this.markDown();
    else this.#probeSoon(); // one dropped connection: look whether others would fail too
    return true;
  }

  markDown(): void {
    if (this.#closed) return;
    if (!this.#down) {
      this.#down = true;
      this.#since = Date.now();
      for (const fn of this.#onDown) fn();
      this.#onDown.clear();
      this.#emit(false);
    }
    this.#probeSoon();
  }

  #probeSoon(): void {
    if (this.#probe || this.#closed) return;
    this.#probe = setTimeout(() => void this.#runProbe(), this.#down ? this.#probeMs : 0);
    this.#probe.unref();
  }

  async #runProbe(): Promise<void> {
    const ok = await ping(this.#db, 1000);
    this.#probe = undefined;
    if (this.#closed) return;
    if (ok && this.#down) {
      this.#down = false;
      this.#emit(true);
    } else if (!ok) {
      this.markDown();
    }
  }

  #emit(up: boolean): void {
    for (const l of this.#listeners) l(up);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#probe);
    clearInterval(this.#heartbeat);
  }
}

/** Whether the database answers `select 1` within `timeoutMs` (an unreachable one must not hang a caller). */
export async function ping(db: Db, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  try {
    return await Promise.race([db.execute(sql`select 1`).then(() => true, () => false), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * What `DatabaseAvailability.watch` asks, on a connection of its own: whether the database
 * answers `select 1` within `timeoutMs`. A connection that did not answer in time is dropped,
 * and the next ask opens a new one: left open and silent (a failover or a network cut leaves it
 * so, with no error), every later ask would queue behind the unanswered one, and a database that
 * answers would be marked down again after each probe put it up, 503s for good.
 */
export class Heartbeat {
  readonly #url: string;
  readonly #timeoutMs: number;
  #connection: Database | undefined;

  constructor(url: string, timeoutMs: number) {
    this.#url = url;
    this.#timeoutMs = timeoutMs;
  }

  async answers(): Promise<boolean> {
    const connection = (this.#connection ??= openDatabase(this.#url, { max: 1 }));
    const ok = await ping(connection.db, this.#timeoutMs);
    if (!ok && this.#connection === connection) {
      this.#connection = undefined;
      void connection.sql.end({ timeout: 0 }).catch(() => {}); // not waited on: it may never answer
    }
    return ok;
  }

  async close(): Promise<void> {
    await this.#connection?.close();
    this.#connection = undefined;
  }
}
