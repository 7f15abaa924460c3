import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

/**
 * The retention job's statements. Each takes at most a fixed number of rows (a constant in the
 * statement text, not a parameter: a prepared statement's generic plan would otherwise guess
 * a tenth of the table and may choose a sequential scan), oldest first by an index made for it
 * (migration 0010), and commits on its own: a short transaction that locks only the rows it
 * deletes, so intake never waits behind it. Rows are then deleted by `id = any(array(...))`:
 * index lookups by key, whatever the planner guesses of the batch's size (never a hash join
 * over a whole table).
 */

/** Rows one statement deletes or marks, at most (about; a wait batch brings its dependants along). */
export const ROW_BATCH = 1000;
/** Waits per batch: each takes its events (about two), signals, notifications, votes and link uses with it. */
export const WAIT_BATCH = 200;

const limit = (n: number) => sql.raw(String(Math.trunc(n)));
const cutoff = (days: number) => sql`now() - ${days}::int * interval '1 day'`;

export interface PurgedWaits {
  waits: number;
  events: number;
  signals: number;
  notifications: number;
  votes: number;
  linkUses: number;
}

/**
 * Deletes up to WAIT_BATCH resolved waits older than `days` together with everything that
 * belongs to them: their history events, their signals (the one that resolved them, quorum
 * votes), notifications, votes and approval-link uses. Kept, and keeping its composite parent
 * or members with it: a wait still waiting, one whose callback is still pending, one resolved
 * within the period. Rows another transaction holds (a redelivery being queued) are skipped.
 */
export async function purgeResolvedWaits(q: Queryable, days: number, batch = WAIT_BATCH): Promise<PurgedWaits> {
  const before = cutoff(days);
  const kept = (alias: string) => {
    const w = sql.raw(alias);
    return sql`(${w}.status = 'waiting' or ${w}.delivery_status = 'pending' or ${w}.resolved_at >= ${before})`;
  };
  const [row] = await q.execute<Record<keyof PurgedWaits, string | number>>(sql`
    with doomed as (
      select w.id from signalbox.waits w
      where w.status <> 'waiting' and w.resolved_at < ${before} and w.delivery_status <> 'pending'
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
      delete from signalbox.notifications n where n.wait_id = any(array(select id from doomed)) returning 1
    ), gone_votes as (
      delete from signalbox.votes v where v.wait_id = any(array(select id from doomed)) returning 1
    ), gone_link_uses as (
      delete from signalbox.link_uses l where l.wait_id = any(array(select id from doomed)) returning 1
    ), gone_waits as (
      delete from signalbox.waits w where w.id = any(array(select id from doomed)) returning 1
    )
    select (select count(*) from gone_waits) as waits, (select count(*) from gone_events) as events,
           (select count(*) from gone_signals) as signals, (select count(*) from gone_notifications) as notifications,
           (select count(*) from gone_votes) as votes, (select count(*) from gone_link_uses) as "linkUses"`);
  return {
    waits: Number(row!.waits),
    events: Number(row!.events),
    signals: Number(row!.signals),
    notifications: Number(row!.notifications),
    votes: Number(row!.votes),
    linkUses: Number(row!.linkUses),
  };
}

/**
 * Deletes up to ROW_BATCH history events that belong to no wait (run.paused, run.cancelled,
 * signal.buffered, ...) older than `days`, but not the signal.buffered event of a signal still
 * waiting within its TTL. The run row keeps the run's state and its sequence, so a run whose
 * every event is gone (a run that never had a wait, say) still answers GET /runs/{run} as before.
 */
export async function purgeEventsWithoutWait(q: Queryable, days: number, batch = ROW_BATCH): Promise<number> {
  const rows = await q.execute(sql`
    delete from signalbox.events where id = any(array(
      select e.id from signalbox.events e
      where e.wait_id is null and e.occurred_at < ${cutoff(days)}
        and not exists (select 1 from signalbox.signals s
                        where s.id = e.signal_id and s.outcome = 'buffered' and s.wait_id is null and s.buffer_expires_at > now())
      order by e.occurred_at limit ${limit(batch)}))
    returning 1`);
  return rows.length;
}

/**
 * Deletes up to ROW_BATCH signal records that belong to no wait, older than `days`: rejections
 * (the dead letters) and buffered signals never consumed, once past their TTL (a buffered
 * signal still within it is kept, however old). Signals of a wait go with the wait. Locked
 * rows are skipped: a wait opening now may be taking that buffered signal.
 */
export async function purgeSignalsWithoutWait(q: Queryable, days: number, batch = ROW_BATCH): Promise<number> {
  const rows = await q.execute(sql`
    delete from signalbox.signals where id = any(array(
      select id from signalbox.signals
      where wait_id is null and received_at < ${cutoff(days)}
        and (outcome <> 'buffered' or buffer_expires_at <= now())
      order by received_at limit ${limit(batch)}
      for update skip locked))
    returning 1`);
  return rows.length;
}

/**
 * Deletes up to ROW_BATCH notifications older than `days` that are no longer pending
 * (delivered, failed, skipped). A pending one is left to its delivery job.
 */
export async function purgeOldNotifications(q: Queryable, days: number, batch = ROW_BATCH): Promise<number> {
  const rows = await q.execute(sql`
    delete from signalbox.notifications where id = any(array(
      select id from signalbox.notifications where created_at < ${cutoff(days)} and status <> 'pending'
      order by created_at limit ${limit(batch)}))
    returning 1`);
  return rows.length;
}

/**
 * Marks up to ROW_BATCH buffered signals past their TTL, never consumed, as `expired` (reads
 * already show them so: this keeps the stored outcome truthful and the index of usable
 * buffered signals small). A wait opening now locks the signal it takes (FOR UPDATE in
 * open_wait and openWait), so a signal is either taken or marked, never both.
 */
export async function markExpiredSignals(q: Queryable, batch = ROW_BATCH): Promise<number> {
  const rows = await q.execute(sql`
    update signalbox.signals set outcome = 'expired' where id = any(array(
      select id from signalbox.signals
      where outcome = 'buffered' and wait_id is null and buffer_expires_at <= now()
      order by buffer_expires_at limit ${limit(batch)}
      for update skip locked))
    returning 1`);
  return rows.length;
}
