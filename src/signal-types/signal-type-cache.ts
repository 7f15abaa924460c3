import type postgres from "postgres";
import type { Queryable } from "../db/client.ts";
import type { SignalTypeRow } from "./signal-type.ts";
import { findSignalType } from "./signal-types.queries.ts";

export const SIGNAL_TYPE_CHANGED_CHANNEL = "signalbox_signal_type_changed";
const MAX_AGE_MS = 30_000;

/**
 * Signal types are read on every signal and wait but change rarely: keep them in memory. A
 * trigger NOTIFYs every change, so every process drops its copy within milliseconds; a lost
 * notification (a LISTEN reconnect clears everything) is bounded by a 30 s age limit.
 */
export class SignalTypeCache {
  readonly #entries = new Map<string, { row: SignalTypeRow | undefined; at: number }>();
  #unlisten: (() => Promise<void>) | undefined;

  async listen(sql: postgres.Sql): Promise<void> {
    const sub = await sql.listen(SIGNAL_TYPE_CHANGED_CHANNEL, (name) => this.#entries.delete(name), () => this.#entries.clear());
    this.#unlisten = sub.unlisten;
  }

  async get(q: Queryable, name: string): Promise<SignalTypeRow | undefined> {
    const hit = this.#entries.get(name);
    if (hit && Date.now() - hit.at < MAX_AGE_MS) return hit.row;
    const row = await findSignalType(q, name);
    this.#entries.set(name, { row, at: Date.now() });
    return row;
  }

  /** Drops every entry: changes may have been missed (the database or the LISTEN connection was away). */
  clear(): void {
    this.#entries.clear();
  }

  /** After a change committed in this process: do not wait for our own NOTIFY. */
  forget(name: string): void {
    this.#entries.delete(name);
  }

  async close(): Promise<void> {
    await this.#unlisten?.().catch(() => {});
  }
}

/** The cached type when the process has a cache, else a database read. */
export function loadSignalType(deps: { db: Queryable; signalTypeCache?: SignalTypeCache }, name: string): Promise<SignalTypeRow | undefined> {
  return deps.signalTypeCache ? deps.signalTypeCache.get(deps.db, name) : findSignalType(deps.db, name);
}
