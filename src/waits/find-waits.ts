import type { Deps } from "../deps.ts";
import { decodeCursor, page } from "../core/pagination.ts";
import { toWaitResource } from "./wait-view.ts";
import { listWaits, type WaitFilter } from "./waits.queries.ts";

export interface FindWaitsQuery extends Omit<WaitFilter, "after"> {
  limit: number;
  cursor?: string;
}

/** ListWaitingSignals and FindRunsWaitingFor: oldest first, keyset-paginated. */
export async function findWaits(deps: Pick<Deps, "db">, q: FindWaitsQuery) {
  const after = decodeCursor(q.cursor);
  const { limit, cursor: _cursor, ...filter } = q;
  const rows = await listWaits(deps.db, { ...filter, after: after && { createdAt: after.at, id: after.id } }, limit);
  return page(rows, limit, (w) => ({ at: w.createdAt, id: w.id }), toWaitResource);
}
