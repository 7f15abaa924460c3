import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

/**
 * Rejected signals are kept per signal type up to `cap`, the oldest purged first: anyone may
 * cause rejections, so a type's dead letters must not grow without bound between retention
 * runs. Each call deletes at most `batch` rows per type (an index range on
 * signals_rejected_by_type); returns how many it deleted in all.
 */
export async function capRejectedSignals(q: Queryable, cap: number, batch = 1_000): Promise<number> {
  const rows = await q.execute<{ deleted: number }>(sql`
    with over_cap as (
      select t.name, first_gone.received_at, first_gone.id
        from signalbox.signal_types t
        cross join lateral (
          select s.received_at, s.id from signalbox.signals s
           where s.signal = t.name and s.sequence is null
           order by s.received_at desc, s.id desc offset ${cap}::int limit 1
        ) as first_gone
    ), doomed as (
      select victim.id
        from over_cap
        cross join lateral (
          select s.id from signalbox.signals s
           where s.signal = over_cap.name and s.sequence is null and (s.received_at, s.id) <= (over_cap.received_at, over_cap.id)
           order by s.received_at, s.id limit ${batch}::int
        ) as victim
    ), gone as (
      delete from signalbox.signals where id in (select id from doomed) returning 1
    )
    select count(*)::int as deleted from gone`);
  return Number(rows[0]?.deleted ?? 0);
}
