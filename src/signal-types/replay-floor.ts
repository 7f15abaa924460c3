import { sql } from "drizzle-orm";
import type { Tx } from "../db/client.ts";
import type { SignalAuth } from "./signal-type.ts";

/**
 * Signed before the type became standard-webhooks (declared, re-declared after a delete, or
 * moved from another scheme) by more than this: refused. The ids a former standard-webhooks type
 * of that name accepted were kept for twice a tolerance no longer known; a minute leaves room
 * for a sender's clock.
 */
const NEW_TYPE_FLOOR_S = 60;

/**
 * A signed webhook-id is refused a second time only while its receipt is kept: twice the
 * tolerance the type had when it was accepted. Raised later, the tolerance would verify a
 * captured delivery again whose receipt is already gone, and it could resolve another run's
 * wait. So when a declaration widens the window (in its transaction, the row locked):
 *  - this type's receipts are kept as long as the new tolerance needs (those still held cover
 *    every id accepted within the old window before now);
 *  - timestamps older than the old window at this moment are refused (`replay_floor_s`): their
 *    receipts may already be purged. With no old window (a new type, or another scheme before),
 *    those older than NEW_TYPE_FLOOR_S. The process clock, which the signature check reads.
 * Returns the floor the declaration keeps: undefined once the window has moved past it.
 */
export async function replayFloorAfter(tx: Tx, name: string, next: { scheme: SignalAuth["scheme"]; tolerance_s: number }, nowS = Math.floor(Date.now() / 1000)): Promise<number | undefined> {
  const [row] = await tx.execute<{ auth: SignalAuth }>(sql`select auth from signalbox.signal_types where name = ${name} for update`);
  let floor = row?.auth.replay_floor_s;
  const before = row?.auth.scheme === "standard-webhooks" ? row.auth.tolerance_s : undefined;
  if (next.scheme === "standard-webhooks" && (before === undefined || next.tolerance_s > before)) {
    floor = Math.max(floor ?? -Infinity, nowS - (before ?? NEW_TYPE_FLOOR_S));
    await tx.execute(sql`
      update signalbox.webhook_receipts set expires_at = greatest(expires_at, now() + ${2 * next.tolerance_s}::int * interval '1 second')
      where signal_type = ${name}`);
  }
  // Past the new window, the floor refuses nothing the tolerance does not.
  return floor !== undefined && floor >= nowS - next.tolerance_s ? floor : undefined;
}
