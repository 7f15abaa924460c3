import type { Listener } from "../db/listen-connection.ts";
import type { Queryable } from "../db/client.ts";
import type { SignalTypeRow } from "./signal-type.ts";
import { findSignalType, listSignalTypeNames } from "./signal-types.queries.ts";

export const SIGNAL_TYPE_CHANGED_CHANNEL = "signalbox_signal_type_changed";
const MAX_AGE_MS = 30_000;
/** Declared types kept at most (far more than any deployment declares; past it, the oldest go). */
const MAX_KNOWN = 10_000;
/**
 * A name outside the set of declared names is trusted to be no signal type while the set is
 * younger than this; past it, a miss reads the set again (one query for every caller, so at most
 * one a second however many made-up names are sent). A type declared on another process is in
 * the set within milliseconds by its NOTIFY, or at worst this long after it if the NOTIFY is lost.
 */
const MISS_TRUST_MS = 1_000;

interface Entry {
  row: SignalTypeRow;
  at: number;
}

/**
 * Signal types are read on every signal and wait but change rarely: keep them in memory. A
 * trigger NOTIFYs every change, so every process drops its copy within milliseconds; a lost
 * notification (a LISTEN reconnect clears everything) is bounded by a 30 s age limit.
 *
 * The set of declared names is held too (bounded by what management declares, not by callers):
 * anyone may POST to any name, so a made-up name is answered from memory, never a database read,
 * and the rate limits can count every undeclared name as one (`isDeclared`).
 */
export class SignalTypeCache {
  readonly #known = new Map<string, Entry>();
  #names: Set<string> | undefined;
  #namesAt = 0;
  #loading: Promise<Set<string>> | undefined;
  /** Names changed (NOTIFY or this process) while the set was being read: added to what it read. */
  readonly #changedWhileLoading = new Set<string>();
  /** Bumped by `clear`: a read of the set started before it is not trusted. */
  #generation = 0;
  #queries = 0;
  #unlisten: (() => Promise<void>) | undefined;
  /** Where the set of names is read again after `clear`; set by `listen`. */
  #db: Queryable | undefined;
  readonly #now: () => number;

  constructor(opts: { now?: () => number } = {}) {
    this.#now = opts.now ?? Date.now;
  }

  /**
   * Follows changes made anywhere, and reads the set of declared names now and after every
   * `clear` (a LISTEN reconnect, the database back): undeclared names share one rate-limit
   * bucket from the first request on, not from the first request that reads the set.
   */
  async listen(sql: Listener, db: Queryable): Promise<void> {
    this.#db = db;
    const sub = await sql.listen(SIGNAL_TYPE_CHANGED_CHANNEL, (name) => this.forget(name), () => this.clear());
    this.#unlisten = sub.unlisten;
    this.#readNamesSoon();
  }

  async get(q: Queryable, name: string): Promise<SignalTypeRow | undefined> {
    const hit = this.#known.get(name);
    if (hit && this.#now() - hit.at < MAX_AGE_MS) return hit.row;
    let names = await this.#declaredNames(q, MAX_AGE_MS);
    if (!names.has(name)) {
      names = await this.#declaredNames(q, MISS_TRUST_MS);
      if (!names.has(name)) return undefined;
    }
    this.#queries++;
    const row = await findSignalType(q, name);
    this.#known.delete(name);
    if (row) {
      remember(this.#known, MAX_KNOWN, name, { row, at: this.#now() });
      this.#names?.add(name);
    } else {
      this.#names?.delete(name); // removed (its NOTIFY put it in the set to be looked up)
    }
    return row;
  }

  /**
   * Whether `name` is a declared type as far as this process knows, without waiting: undefined
   * until the set of names has been read once. A type declared elsewhere a moment ago may be
   * false for the milliseconds its NOTIFY takes.
   */
  isDeclared(name: string): boolean | undefined {
    return this.#names?.has(name);
  }

  /** Drops every entry: changes may have been missed (the database or the LISTEN connection was away). */
  clear(): void {
    this.#known.clear();
    this.#names = undefined;
    this.#loading = undefined;
    this.#changedWhileLoading.clear();
    this.#generation++;
    this.#readNamesSoon();
  }

  /** After a change committed in this process: do not wait for our own NOTIFY. */
  forget(name: string): void {
    this.#known.delete(name);
    // Declared or removed: in the set either way, so the next get looks it up (and settles it).
    this.#names?.add(name);
    if (this.#loading) this.#changedWhileLoading.add(name);
  }

  /** How many names are held: the declared ones, bounded whatever callers send. */
  get size(): number {
    return Math.max(this.#known.size, this.#names?.size ?? 0);
  }

  /** Database reads this cache has made (a type, or the set of names): for tests. */
  get queries(): number {
    return this.#queries;
  }

  async close(): Promise<void> {
    await this.#unlisten?.().catch(() => {});
  }

  /** Reads the set in the background; a failure (the database away) leaves it to the next request. */
  #readNamesSoon(): void {
    if (!this.#db) return;
    Promise.resolve(this.#declaredNames(this.#db, MAX_AGE_MS)).catch(() => {});
  }

  /** The declared names, read again (once for all callers) when older than `maxAgeMs`. */
  #declaredNames(q: Queryable, maxAgeMs: number): Promise<Set<string>> | Set<string> {
    if (this.#names && this.#now() - this.#namesAt < maxAgeMs) return this.#names;
    if (this.#loading) return this.#loading;
    const generation = this.#generation;
    const startedAt = this.#now();
    this.#queries++;
    const loading = listSignalTypeNames(q).then(
      (list) => {
        const names = new Set(list);
        for (const n of this.#changedWhileLoading) names.add(n);
        if (this.#generation === generation) {
          this.#names = names;
          this.#namesAt = startedAt;
          this.#changedWhileLoading.clear();
          if (this.#loading === loading) this.#loading = undefined;
        }
        return names;
      },
      (err: unknown) => {
        if (this.#loading === loading) this.#loading = undefined;
        throw err;
      },
    );
    this.#loading = loading;
    return loading;
  }
}

/** Adds an entry, dropping the oldest past `max` (a Map iterates in insertion order). */
function remember(map: Map<string, Entry>, max: number, name: string, entry: Entry): void {
  map.set(name, entry);
  if (map.size > max) map.delete(map.keys().next().value!);
}

/** The cached type when the process has a cache, else a database read. */
export function loadSignalType(deps: { db: Queryable; signalTypeCache?: SignalTypeCache }, name: string): Promise<SignalTypeRow | undefined> {
  return deps.signalTypeCache ? deps.signalTypeCache.get(deps.db, name) : findSignalType(deps.db, name);
}
