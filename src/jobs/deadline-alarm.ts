import { sql, type SQL } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

/**
 * The deadline alarm (db/functions/deadline_alarm.sql): one graphile-worker job due at the
 * earliest open deadline, so that a wait whose deadline is at or after it needs no timeout job
 * of its own. Opening a timed wait so costs a read of the alarm's row instead of a job's insert.
 */

/** Makes sure a new wait's deadline fires: the alarm covers it, or a job of its own does. In the opening transaction. */
export async function coverDeadline(tx: Queryable, waitId: string, deadline: SQL): Promise<void> {
  await tx.execute(sql`select signalbox.cover_deadline(${waitId}::text, ${deadline})`);
}

/** Arms the alarm for the earliest open deadline (after it ran; the sweep, in case it went missing). */
export async function armDeadlineAlarm(q: Queryable): Promise<void> {
  await q.execute(sql`select signalbox.arm_deadline_alarm()`);
}
