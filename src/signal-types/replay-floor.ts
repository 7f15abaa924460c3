import { sql } from "drizzle-orm";
import type { Tx } from "../db/client.ts";
import type { SignalAuth } from "./signal-type.ts";

/**
 * A signed webhook-id is refused a second time only while its receipt is kept: twice the
 * tolerance the type had when it was accepted. Raised later, the tolerance would verify a
 * captured delivery again whose receipt is already gone, and it could resolve another run's
 * wait. So raising it (in the declaration's transaction, the row locked):
 *  - keeps this type's receipts as long as the new tolerance needs (those still held cover
 *    every id accepted within the old window before now);
 *  - refuses timestamps older than the old window at this moment (`replay_floor_s`): their
 *    receipts may already be purged. The process clock, which the signature check reads.
 * Returns the floor the declaration keeps: undefined once the window has moved past it.
 */
export async function replayFloorAfter(tx: Tx, name: string, next: { scheme: SignalAuth["scheme"]; tolerance_s: number }, nowS = Math.floor(Date.now() / 1000)): Promise<number | undefined> {
  const [row] = await tx.execute<{ auth: SignalAuth }>(sql`select auth from signalbox.signal_types where name = ${name} for update`);
  let floor = row?.auth.replay_floor_s;
  if (row && next.scheme === "standard-webhooks" && next.tolerance_s > row.auth.tolerance_s) {
    floor = Math.max(floor ?? -Infinity, nowS - row.auth.tolerance_s);
    await tx.execute(sql`
      update signalbox.webhook_receipts set expires_at = greatest(expires_at, now() + ${2 * next.tolerance_s}::int * interval '1 second')
      where signal_type = ${name}`);
  }
  // Past the new window, the floor refuses nothing the tolerance does not.
  return floor !== undefined && floor >= nowS - next.tolerance_s ? floor : undefined;
}
