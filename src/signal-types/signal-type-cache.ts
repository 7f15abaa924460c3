import type postgres from "postgres";
import type { Queryable } from "../db/client.ts";
import type { SignalTypeRow } from "./signal-type.ts";
import { findSignalType } from "./signal-types.queries.ts";

export const SIGNAL_TYPE_CHANGED_CHANNEL = "signalbox_signal_type_changed";
const MAX_AGE_MS = 30_000;
/** Declared types kept at most (far more than any deployment declares; past it, the oldest go). */
const MAX_KNOWN = 10_000;
/**
 * Names that are no signal type, kept at most. Anyone may POST to any name, so these are the
 * attacker's choice: a small set of their own, so a flood of made-up names neither grows the
 * heap nor pushes declared types out.
 */
const MAX_UNKNOWN = 1_000;

interface Entry {
  row: SignalTypeRow | undefined;
  at: number;
}

/**
 * Signal types are read on every signal and wait but change rarely: keep them in memory. A
 * trigger NOTIFYs every change, so every process drops its copy within milliseconds; a lost
 * notification (a LISTEN reconnect clears everything) is bounded by a 30 s age limit.
 */
export class SignalTypeCache {
  readonly #known = new Map<string, Entry>();
  readonly #unknown = new Map<string, Entry>();
  #unlisten: (() => Promise<void>) | undefined;

  async listen(sql: postgres.Sql): Promise<void> {
    const sub = await sql.listen(SIGNAL_TYPE_CHANGED_CHANNEL, (name) => this.forget(name), () => this.clear());
    this.#unlisten = sub.unlisten;
  }

  async get(q: Queryable, name: string): Promise<SignalTypeRow | undefined> {
    const hit = this.#known.get(name) ?? this.#unknown.get(name);
    if (hit && Date.now() - hit.at < MAX_AGE_MS) return hit.row;
    const row = await findSignalType(q, name);
    this.#forgetOne(name);
    remember(row ? this.#known : this.#unknown, row ? MAX_KNOWN : MAX_UNKNOWN, name, { row, at: Date.now() });
    return row;
  }

  /** Drops every entry: changes may have been missed (the database or the LISTEN connection was away). */
  clear(): void {
    this.#known.clear();
    this.#unknown.clear();
  }

  /** After a change committed in this process: do not wait for our own NOTIFY. */
  forget(name: string): void {
    this.#forgetOne(name);
  }

  /** How many names are held (declared and unknown): bounded whatever callers send. */
  get size(): number {
    return this.#known.size + this.#unknown.size;
  }

  async close(): Promise<void> {
    await this.#unlisten?.().catch(() => {});
  }

  #forgetOne(name: string): void {
    this.#known.delete(name);
    this.#unknown.delete(name);
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
