import type { SecretBox } from "./auth/secret-box.ts";
import type { Config } from "./config.ts";
import type { LinkKey } from "./auth/bootstrap-secrets.ts";
import type { SignalTypeCache } from "./signal-types/signal-type-cache.ts";
import type { Db } from "./db/client.ts";
import type { Log } from "./core/logger.ts";
import type { Metrics } from "./core/metrics.ts";
import type { CallbackHandOff } from "./jobs/callback-hand-off.ts";

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
  /** Runs the callbacks intake resolves in this process (absent: the workers fetch their jobs). */
  callbackHandOff?: CallbackHandOff;
}
