import { eq, sql } from "drizzle-orm";
import type { Deps } from "../deps.ts";
import { BadRequestError, NotFoundError } from "../core/errors.ts";
import { parseEventId, listRunEvents, toEventResource } from "../events/events.queries.ts";
import type { Queryable } from "../db/client.ts";
import { runs } from "../db/schema.ts";

export async function getRunResource(q: Queryable, runId: string) {
  const [run] = await q
    .select({
      row: runs,
      // Correlated by the parameter, not by column: drizzle may print columns unqualified.
      openWaits: sql<number>`(select count(*)::int from signalbox.waits w where w.run_id = ${runId}::text and w.status = 'waiting')`,
      children: sql<string[]>`coalesce((select json_agg(c.run_id order by c.run_id) from signalbox.runs c where c.parent_run_id = ${runId}::text), '[]'::json)`,
      continuedFrom: sql<string | null>`(select p.run_id from signalbox.runs p where p.continued_as = ${runId}::text)`,
      newestRunId: sql<string>`(
        with recursive chain as (
          select run_id, continued_as, 1 as depth from signalbox.runs where run_id = ${runId}::text
          union all
          select r.run_id, r.continued_as, chain.depth + 1 from signalbox.runs r join chain on r.run_id = chain.continued_as
          where chain.depth < 100000
        )
        select run_id from chain where continued_as is null)`,
    })
    .from(runs)
    .where(eq(runs.runId, runId));
  if (!run) throw new NotFoundError(`no run '${runId}' is known`);
  const r = run.row;
  return {
    run_id: r.runId,
    status: r.status as "active" | "cancelled" | "continued",
    control: {
      is_paused: r.isPaused,
      paused_at: r.pausedAt?.toISOString() ?? null,
      pause_reason: r.pauseReason,
      paused_by: r.pausedBy,
      is_cancelled: r.status === "cancelled",
      cancel_reason: r.cancelReason,
      cancelled_by: r.cancelledBy,
    },
    parent_run_id: r.parentRunId,
    continued_as: r.continuedAs,
    continued_at: r.continuedAt?.toISOString() ?? null,
    continued_from: run.continuedFrom,
    newest_run_id: run.newestRunId ?? r.runId,
    children: run.children,
    open_waits: Number(run.openWaits),
  };
}
export type RunResource = Awaited<ReturnType<typeof getRunResource>>;

export function getRun(deps: Pick<Deps, "db">, runId: string): Promise<RunResource> {
  return getRunResource(deps.db, runId);
}

/** The run's history, oldest first, after the event id given. */
export async function getRunEvents(deps: Pick<Deps, "db">, runId: string, after: string | undefined, limit: number) {
  let afterId = 0;
  if (after !== undefined) {
    const parsed = parseEventId(after);
    if (parsed === undefined) throw new BadRequestError("after must be an event id (ev_...)", [{ path: "/after", message: "is not an event id" }]);
    afterId = parsed;
  }
  const rows = await listRunEvents(deps.db, runId, afterId, limit);
  const more = rows.length > limit;
  const items = (more ? rows.slice(0, limit) : rows).map(toEventResource);
  return { items, next_cursor: more ? (items[items.length - 1]?.id ?? null) : null };
}
