import type { Db, Tx } from "./client.ts";

const RETRYABLE = new Set(["40001", "40P01"]); // serialization failure, deadlock

/**
 * Runs `fn` in one transaction, retrying a few times when Postgres reports a serialization
 * failure or deadlock (the transaction rolled back whole, so running it again is safe).
 */
export async function withTransaction<T>(db: Db, fn: (tx: Tx) => Promise<T>): Promise<T> {
  return retryingRollbacks(() => db.transaction(fn));
}

/**
 * Runs `attempt` (one whole transaction, or one statement in its own) again, up to five times
 * in all, when Postgres rolled it back for a serialization failure or deadlock.
 */
export async function retryingRollbacks<T>(attempt: () => Promise<T>): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      const code = pgCode(err);
      if (n >= 5 || !code || !RETRYABLE.has(code)) throw err;
    }
  }
}

export function pgCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 3 && e && typeof e === "object"; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && code.length === 5) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}
