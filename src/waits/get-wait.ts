import type { Deps } from "../deps.ts";
import { NotFoundError } from "../core/errors.ts";
import type { ChangeFeed } from "../events/change-feed.ts";
import { toWaitResource, type WaitResource } from "./wait-view.ts";
import { findWait } from "./waits.queries.ts";

export const MAX_WAIT_S = 60;

/**
 * Reads a wait; with `waitS` > 0 holds the answer until the wait leaves `waiting`, the time
 * passes, the client goes away or the server shuts down (`signal`), then answers the state.
 */
export async function getWait(
  deps: Pick<Deps, "db"> & { changes: ChangeFeed },
  id: string,
  waitS = 0,
  signal: AbortSignal = new AbortController().signal,
): Promise<WaitResource> {
  const read = async () => {
    const wait = await findWait(deps.db, id);
    if (!wait) throw new NotFoundError(`no wait with id '${id}'`);
    return wait;
  };
  const wait = waitS > 0 ? await deps.changes.hold(`wait:${id}`, Math.min(waitS, MAX_WAIT_S) * 1000, signal, read, (w) => w.status !== "waiting") : await read();
  return toWaitResource(wait);
}
