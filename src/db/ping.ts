import { sql } from "drizzle-orm";
import type { Db } from "./client.ts";

/** Whether the database answers `select 1` within `timeoutMs` (an unreachable one must not hang /readyz). */
export async function pingDatabase(db: Db, timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  try {
    return await Promise.race([db.execute(sql`select 1`).then(() => true, () => false), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
