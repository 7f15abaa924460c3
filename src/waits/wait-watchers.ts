import type postgres from "postgres";
import type { Log } from "../core/logger.ts";
import { WAIT_CHANGED_CHANNEL } from "./resolve-waits.ts";

/**
 * Wakes long-polls when a wait changes, in this process or any other sharing the database:
 * every resolution NOTIFYs (in its transaction, so only once committed) and one LISTEN
 * connection per process fans the ids out to in-memory waiters. No connection is held while
 * a client waits.
 */
export class WaitWatchers {
  readonly #waiters = new Map<string, Set<() => void>>();
  #unlisten: (() => Promise<void>) | undefined;

  async listen(sql: postgres.Sql, log: Log): Promise<void> {
    const sub = await sql.listen(
      WAIT_CHANGED_CHANNEL,
      (waitId) => this.wake(waitId),
      // Initial connect and every reconnect: notifications may have been missed, re-check everyone.
      () => this.wakeAll(),
    );
    this.#unlisten = sub.unlisten;
    log.debug("listening for wait changes");
  }

  /** Resolves when `waitId` may have changed, or on `signal` abort. Register before reading state. */
  watch(waitId: string, signal: AbortSignal): { changed: Promise<void>; stop(): void } {
    let wake!: () => void;
    const changed = new Promise<void>((resolve) => (wake = resolve));
    let set = this.#waiters.get(waitId);
    if (!set) this.#waiters.set(waitId, (set = new Set()));
    set.add(wake);
    const onAbort = () => wake();
    signal.addEventListener("abort", onAbort, { once: true });
    const stop = () => {
      signal.removeEventListener("abort", onAbort);
      set.delete(wake);
      if (set.size === 0 && this.#waiters.get(waitId) === set) this.#waiters.delete(waitId);
    };
    return { changed, stop };
  }

  wake(waitId: string): void {
    for (const wake of this.#waiters.get(waitId) ?? []) wake();
  }

  wakeAll(): void {
    for (const set of this.#waiters.values()) for (const wake of set) wake();
  }

  get size(): number {
    let n = 0;
    for (const set of this.#waiters.values()) n += set.size;
    return n;
  }

  async close(): Promise<void> {
    this.wakeAll();
    await this.#unlisten?.().catch(() => {});
  }
}
