import { sql, type SQL } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

/**
 * The retention job's statements. Each takes at most a fixed number of rows (a constant in the
 * statement text, not a parameter: a prepared statement's generic plan would otherwise guess
 * a tenth of the table and may choose a sequential scan), oldest first along an index made for
 * it (migration 0010), and commits on its own: a short transaction that locks only the rows it
 * deletes, so intake never waits behind it. Rows are then deleted by `= any(array(...))`:
 * index lookups by key, whatever the planner guesses of the batch's size.
 *
 * Each returns `last`, the newest key it took; passed back as `from`, the next batch starts
 * there instead of walking again over what it left behind (rows it must keep, and the index
 * entries of rows just deleted, which stay until vacuum).
 */

/**
 * Rows one statement deletes or marks, at most (a wait batch brings its dependants along).
 * Small: a batch is a burst of under a millisecond of one core; longer bursts are what intake's
 * p99 feels (batches of 100, 250 and 1,000 rows measured worse in bench --retention).
 */
export const ROW_BATCH = 50;
/** Waits per batch: each takes its events (about two), signals, notifications, votes and link uses with it. */
export const WAIT_BATCH = 10;

export interface Batch {
  /** Rows deleted (or marked). */
  rows: number;
  /** The newest ordering key taken (text, exact), or null when nothing was. */
  last: string | null;
}

const limit = (n: number) => sql.raw(String(Math.trunc(n)));
const cutoff = (days: number) => sql`now() - ${days}::int * interval '1 day'`;
/** A timestamp as text that sorts as it compares (UTC, microseconds) and reads back exactly. */
const isoKey = (t: SQL) => sql`to_char(${t} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
const startingAt = (column: SQL, from: string | null) => (from === null ? sql`true` : sql`${column} >= ${from}::timestamptz`);

export interface PurgedWaits {
  waits: number;
  events: number;
  signals: number;
  notifications: number;
  votes: number;
  /** Recorded callback attempts (GET /waits/{id}/deliveries). */
  deliveryAttempts: number;
  linkUses: number;
}

/**
 * Deletes up to WAIT_BATCH resolved waits older than `days` together with everything that
 * belongs to them: their history events, their signals (the one that resolved them, quorum
 * votes), notifications, votes, callback attempts and approval-link uses. Kept: a wait still
 * waiting, one whose callback is still pending, one resolved within the period; and a composite goes as a whole,
 * so one kept member keeps its parent and siblings, a kept parent its members. Rows another
 * transaction holds (a redelivery being queued) are skipped. `last` is a resolved_at.
 */
export async function purgeResolvedWaits(q: Queryable, days: number, from: string | null = null, batch = WAIT_BATCH): Promise<PurgedWaits & { last: string | null }> {
  const before = cutoff(days);
  const kept = (alias: string) => {
    const w = sql.raw(alias);
    return sql`(${w}.status = 'waiting' or ${w}.delivery_status = 'pending' or ${w}.resolved_at >= ${before})`;
  };
  const [row] = await q.execute<Record<keyof PurgedWaits, string | number> & { last: string | null }>(sql`
    with doomed as (
      select w.id, w.resolved_at from signalbox.waits w
      where w.status <> 'waiting' and w.resolved_at < ${before} and ${startingAt(sql`w.resolved_at`, from)}
        and w.delivery_status <> 'pending'
        -- A composite goes whole: its members, its parent, its siblings (none when parent_wait_id is null).
        and not exists (select 1 from signalbox.waits m where m.parent_wait_id = w.id and ${kept("m")})
        and not exists (select 1 from signalbox.waits p where p.id = w.parent_wait_id and ${kept("p")})
        and not exists (select 1 from signalbox.waits s where s.parent_wait_id = w.parent_wait_id and ${kept("s")})
      order by w.resolved_at
      limit ${limit(batch)}
      for update of w skip locked
    ), gone_events as (
      delete from signalbox.events e where e.wait_id = any(array(select id from doomed)) returning 1
    ), gone_signals as (
      delete from signalbox.signals s where s.wait_id = any(array(select id from doomed)) returning 1
    ), gone_notifications as (
      -- Pending ones too: a notification whose wait is no longer waiting is skipped, never sent.
      delete from signalbox.notifications n where n.wait_id = any(array(select id from doomed)) returning 1
    ), gone_votes as (
      delete from signalbox.votes v where v.wait_id = any(array(select id from doomed)) returning 1
    ), gone_delivery_attempts as (
      delete from signalbox.delivery_attempts d where d.wait_id = any(array(select id from doomed)) returning 1
    ), gone_link_uses as (
      delete from signalbox.link_uses l where l.wait_id = any(array(select id from doomed)) returning 1
    ), gone_waits as (
      delete from signalbox.waits w where w.id = any(array(select id from doomed)) returning 1
    )
    select (select count(*) from gone_waits) as waits, (select count(*) from gone_events) as events,
           (select count(*) from gone_signals) as signals, (select count(*) from gone_notifications) as notifications,
           (select count(*) from gone_votes) as votes, (select count(*) from gone_delivery_attempts) as "deliveryAttempts", (select count(*) from gone_link_uses) as "linkUses",
           (select ${isoKey(sql`max(resolved_at)`)} from doomed) as last`);
  return {
    waits: Number(row!.waits),
    events: Number(row!.events),
    signals: Number(row!.signals),
    notifications: Number(row!.notifications),
    votes: Number(row!.votes),
    deliveryAttempts: Number(row!.deliveryAttempts),
    linkUses: Number(row!.linkUses),
    last: row!.last ?? null,
  };
}

/** Runs a `delete/update ... where id = any(array(<batch>)) returning <key>::text as key` and sums it up. */
async function keyedBatch(q: Queryable, statement: SQL): Promise<Batch> {
  const rows = await q.execute<{ key: string }>(statement);
  let last: string | null = null;
  for (const r of rows) if (last === null || r.key > last) last = r.key;
  return { rows: rows.length, last };
}

/**
 * Deletes up to ROW_BATCH history events that belong to no wait (run.paused, run.cancelled,
 * signal.buffered, ...) older than `days`, but not the signal.buffered event of a signal still
 * waiting within its TTL. The run row keeps the run's state and its sequence, so a run whose
 * every event is gone (a run that never had a wait, say) still answers GET /runs/{run} as before.
 */
export async function purgeEventsWithoutWait(q: Queryable, days: number, from: string | null = null, batch = ROW_BATCH): Promise<Batch> {
  return keyedBatch(q, sql`
    delete from signalbox.events where id = any(array(
      select e.id from signalbox.events e
      where e.wait_id is null and e.occurred_at < ${cutoff(days)} and ${startingAt(sql`e.occurred_at`, from)}
        and not exists (select 1 from signalbox.signals s
                        where s.id = e.signal_id and s.outcome = 'buffered' and s.wait_id is null and s.buffer_expires_at > now())
      order by e.occurred_at limit ${limit(batch)}))
    returning ${isoKey(sql`occurred_at`)} as key`);
}

/**
 * Deletes up to ROW_BATCH signal records that belong to no wait, older than `days`: rejections
 * (the dead letters) and buffered signals never consumed, once past their TTL (a buffered
 * signal still within it is kept, however old). A `started` signal never consumed, and those
 * kept behind it (no TTL), go by age like rejections. Signals of a wait go with the wait. Locked
 * rows are skipped: a wait opening now may be taking that buffered signal.
 */
export async function purgeSignalsWithoutWait(q: Queryable, days: number, from: string | null = null, batch = ROW_BATCH): Promise<Batch> {
  return keyedBatch(q, sql`
    delete from signalbox.signals where id = any(array(
      select id from signalbox.signals
      where wait_id is null and received_at < ${cutoff(days)} and ${startingAt(sql`received_at`, from)}
        and (outcome <> 'buffered' or buffer_expires_at is null or buffer_expires_at <= now())
      order by received_at limit ${limit(batch)}
      for update skip locked))
    returning ${isoKey(sql`received_at`)} as key`);
}

/**
 * Deletes up to WAIT_BATCH run starts (signal-with-start) older than `days` whose run.start is no
 * longer pending (delivered or failed), each with its recorded attempts. A pending one is left to
 * its delivery job. The run's row stays, with its sequence: a run once started is never started
 * again, whatever retention removed. `last` is an occurred_at.
 */
export async function purgeOldStarts(q: Queryable, days: number, from: string | null = null, batch = WAIT_BATCH): Promise<Batch> {
  return keyedBatch(q, sql`
    with doomed as (
      select run_id from signalbox.run_starts
      where occurred_at < ${cutoff(days)} and ${startingAt(sql`occurred_at`, from)} and delivery_status <> 'pending'
      order by occurred_at limit ${limit(batch)}
      for update skip locked
    ), gone_attempts as (
      delete from signalbox.delivery_attempts d where d.start_run_id = any(array(select run_id from doomed)) returning 1
    )
    delete from signalbox.run_starts where run_id = any(array(select run_id from doomed))
    returning ${isoKey(sql`occurred_at`)} as key`);
}

/**
 * Deletes up to ROW_BATCH notifications older than `days` that are no longer pending
 * (delivered, failed, skipped). A pending one is left to its delivery job.
 */
export async function purgeOldNotifications(q: Queryable, days: number, from: string | null = null, batch = ROW_BATCH): Promise<Batch> {
  return keyedBatch(q, sql`
    delete from signalbox.notifications where id = any(array(
      select id from signalbox.notifications
      where created_at < ${cutoff(days)} and ${startingAt(sql`created_at`, from)} and status <> 'pending'
      order by created_at limit ${limit(batch)}))
    returning ${isoKey(sql`created_at`)} as key`);
}

/**
 * Marks up to ROW_BATCH buffered signals past their TTL, never consumed, as `expired` (reads
 * already show them so: this keeps the stored outcome truthful and the index of usable
 * buffered signals small). A wait opening now locks the signal it takes (FOR UPDATE in
 * open_wait and openWait), so a signal is either taken or marked, never both. No `from`:
 * marked rows leave the index this walks.
 */
export async function markExpiredSignals(q: Queryable, batch = ROW_BATCH): Promise<Batch> {
  const rows = await q.execute(sql`
    update signalbox.signals set outcome = 'expired' where id = any(array(
      select id from signalbox.signals
      where outcome = 'buffered' and wait_id is null and buffer_expires_at <= now()
      order by buffer_expires_at limit ${limit(batch)}
      for update skip locked))
    returning 1`);
  return { rows: rows.length, last: null };
}
