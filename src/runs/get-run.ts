import { and, eq, sql } from "drizzle-orm";
import type { Deps } from "../core/context.ts";
import { NotFoundError } from "../core/errors.ts";
import { parseEventId, listRunEvents, toEventResource } from "../events/events.queries.ts";
import type { Queryable } from "../db/client.ts";
import { runs, waits } from "../db/schema.ts";
import { BadRequestError } from "../core/errors.ts";

export async function getRunResource(q: Queryable, runId: string) {
  const [run] = await q
    .select({
      runId: runs.runId,
      status: runs.status,
      cancelReason: runs.cancelReason,
      cancelledBy: runs.cancelledBy,
      cancelledAt: runs.cancelledAt,
      openWaits: sql<number>`(select count(*)::int from ${waits} where ${and(eq(waits.runId, runs.runId), eq(waits.status, "waiting"))})`,
    })
    .from(runs)
    .where(eq(runs.runId, runId));
  if (!run) throw new NotFoundError(`no run '${runId}' is known`);
  const cancelled = run.status === "cancelled";
  return {
    run_id: run.runId,
    status: run.status as "active" | "cancelled",
    control: {
      is_paused: false,
      paused_at: null,
      pause_reason: null,
      paused_by: null,
      is_cancelled: cancelled,
      cancel_reason: run.cancelReason,
      cancelled_by: run.cancelledBy,
    },
    parent_run_id: null,
    children: [] as string[],
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
