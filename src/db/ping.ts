import type { Db } from "./client.ts";
import { ping } from "./availability.ts";

/** Whether the database answers `select 1` within `timeoutMs` (an unreachable one must not hang /readyz). */
export function pingDatabase(db: Db, timeoutMs = 1000): Promise<boolean> {
  return ping(db, timeoutMs);
}
