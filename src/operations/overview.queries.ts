import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

/** Rows per bucket of a time window: bucket 0 starts at `from`. */
export interface BucketCount {
  series: string;
  bucket: number;
  n: number;
}

/** Open waits per signal name, most first, with the total and the number of names (one read of the open waits). */
export async function countOpenWaitsBySignal(q: Queryable, limit: number): Promise<{ total: number; names: number; top: Array<{ signal: string; n: number }> }> {
  const rows = await q.execute<{ signal: string; n: number; total: number; names: number }>(sql`
    select signal, n, (sum(n) over ())::int as total, (count(*) over ())::int as names
    from (select signal, count(*)::int as n from signalbox.waits where status = 'waiting' group by signal) per
    order by n desc, signal limit ${limit}::int`);
  return { total: Number(rows[0]?.total ?? 0), names: Number(rows[0]?.names ?? 0), top: rows.map((r) => ({ signal: r.signal, n: Number(r.n) })) };
}

/** Open waits whose deadline falls in [from, to): the partial deadline index of open waits. */
export async function countOpenWaitsDue(q: Queryable, from: Date, to: Date): Promise<number> {
  const [row] = await q.execute<{ n: number }>(sql`
    select count(*)::int as n from signalbox.waits
    where status = 'waiting' and timeout_at >= ${from.toISOString()}::timestamptz and timeout_at < ${to.toISOString()}::timestamptz`);
  return Number(row?.n ?? 0);
}

/** Waits resolved in [from, to), per status and bucket (the retention index on resolved_at). */
export async function countResolvedWaits(q: Queryable, from: Date, to: Date, bucketS: number): Promise<BucketCount[]> {
  const rows = await q.execute<{ series: string; bucket: number; n: number }>(sql`
    select status as series, floor(extract(epoch from resolved_at - ${from.toISOString()}::timestamptz) / ${bucketS}::int)::int as bucket, count(*)::int as n
    from signalbox.waits
    where status <> 'waiting' and resolved_at >= ${from.toISOString()}::timestamptz and resolved_at < ${to.toISOString()}::timestamptz
    group by 1, 2`);
  return rows.map((r) => ({ series: r.series, bucket: Number(r.bucket), n: Number(r.n) }));
}

/**
 * Rejected signals (dead letters) recorded in [from, to), per bucket. Rejections keep no wait
 * and no sequence: the index of signals without a wait, by time, holds them.
 */
export async function countDeadLetters(q: Queryable, from: Date, to: Date, bucketS: number): Promise<BucketCount[]> {
  const rows = await q.execute<{ bucket: number; n: number }>(sql`
    select floor(extract(epoch from received_at - ${from.toISOString()}::timestamptz) / ${bucketS}::int)::int as bucket, count(*)::int as n
    from signalbox.signals
    where wait_id is null and sequence is null and received_at >= ${from.toISOString()}::timestamptz and received_at < ${to.toISOString()}::timestamptz
    group by 1`);
  return rows.map((r) => ({ series: "dead_letter", bucket: Number(r.bucket), n: Number(r.n) }));
}

/**
 * Deliveries failing now (callbacks and run starts), by their delivery status: the same set GET
 * /deliveries lists (latest attempt not delivered, still the latest), read from its partial index.
 */
export async function countFailingDeliveries(q: Queryable): Promise<{ failed: number; pending: number }> {
  // Attempts drive, from their partial index; each finds its wait by primary key (a LATERAL with
  // LIMIT 1, as listFailingDeliveries does, so the planner does not hash-join over every wait).
  const rows = await q.execute<{ status: string; n: number }>(sql`
    select w.status, count(*)::int as n
    from signalbox.delivery_attempts a
    cross join lateral (
      (select w.delivery_status as status from signalbox.waits w
       where a.wait_id is not null and w.id = a.wait_id and w.delivery_attempts = a.attempt and w.delivery_status in ('pending', 'failed')
       limit 1)
      union all -- a run start's (signal-with-start), as listFailingDeliveries
      (select s.delivery_status from signalbox.run_starts s
       where a.start_run_id is not null and s.run_id = a.start_run_id and s.delivery_attempts = a.attempt and s.delivery_status in ('pending', 'failed')
       limit 1)
    ) w
    where a.latest and a.outcome <> 'delivered'
    group by 1`);
  const by = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  return { failed: by.failed ?? 0, pending: by.pending ?? 0 };
}
