import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

/**
 * Claims a link's one use. The primary key on link_id decides between concurrent uses, not a
 * read: the second insert waits for the first transaction and then finds the row. Returns
 * false when the link was used already.
 */
export async function claimLink(q: Queryable, linkId: string, waitId: string): Promise<boolean> {
  const rows = await q.execute(sql`
    insert into signalbox.link_uses (link_id, wait_id) values (${linkId}::text, ${waitId}::text)
    on conflict (link_id) do nothing
    returning link_id`);
  return rows.length === 1;
}

/** When the link was used, if it was (for the page only: the claim above is what decides). */
export async function findLinkUse(q: Queryable, linkId: string): Promise<Date | undefined> {
  const [row] = await q.execute<{ used_at: Date | string }>(sql`select used_at from signalbox.link_uses where link_id = ${linkId}::text`);
  return row ? new Date(row.used_at) : undefined;
}

/**
 * The accepted signal of this run and name that holds an idempotency key, if any: the one
 * intake would compare an answer sent with that key against (by the signals_idempotency index).
 */
export async function findKeyHolder(q: Queryable, runId: string, signal: string, key: string): Promise<{ id: string; payload: string | null } | undefined> {
  const [row] = await q.execute<{ id: string; payload: string | null }>(sql`
    select id, payload from signalbox.signals
    where run_id = ${runId}::text and signal = ${signal}::text and idempotency_key = ${key}::text and sequence is not null`);
  return row;
}
