import type { SecretBox } from "../auth/secret-box.ts";
import type { Config } from "../config.ts";
import type { SignalTypeCache } from "../signal-types/signal-type-cache.ts";
import type { Db, Tx } from "../db/client.ts";
import type { Log } from "./logger.ts";
import type { Metrics } from "./metrics.ts";

/** What every verb may use. Built once in main.ts (or per test) and injected; nothing reads globals. */
export interface Deps {
  db: Db;
  config: Config;
  log: Log;
  /** Secrets generated or loaded at start (callback signing key, API keys, approval-link keys). */
  secrets: { callbackSecret: Uint8Array; apiKeys: string[]; linkKeys: LinkKey[] };
  /** Encrypts signing secrets at rest; absent when SIGNALBOX_SECRET_KEY is not set. */
  secretBox?: SecretBox;
  metrics?: Metrics;
  /** Signal types kept in memory, dropped on change (absent: read from the database each time). */
  signalTypeCache?: SignalTypeCache;
}

/** An approval-link signing key: the first of the ring signs, all verify (by `kid`). */
export interface LinkKey {
  kid: string;
  secret: Uint8Array;
}

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
