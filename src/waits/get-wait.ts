import type { Deps } from "../core/context.ts";
import { NotFoundError } from "../core/errors.ts";
import { toWaitResource, type WaitResource } from "./wait-view.ts";
import type { WaitWatchers } from "./wait-watchers.ts";
import { findWait } from "./waits.queries.ts";

export const MAX_WAIT_S = 60;

/**
 * Reads a wait; with `waitS` > 0 holds the answer until the wait leaves `waiting`, the time
 * passes, the client goes away or the server shuts down (`signal`), then answers the state.
 */
export async function getWait(
  deps: Pick<Deps, "db"> & { watchers: WaitWatchers },
  id: string,
  waitS = 0,
  signal: AbortSignal = new AbortController().signal,
): Promise<WaitResource> {
  const deadline = Date.now() + Math.min(waitS, MAX_WAIT_S) * 1000;
  for (;;) {
    const watch = deps.watchers.watch(id, signal); // register before reading: no lost wake-up
    try {
      const wait = await findWait(deps.db, id);
      if (!wait) throw new NotFoundError(`no wait with id '${id}'`);
      const remaining = deadline - Date.now();
      if (wait.status !== "waiting" || signal.aborted || remaining <= 0) return toWaitResource(wait);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([watch.changed, new Promise<void>((r) => (timer = setTimeout(r, remaining)))]);
      clearTimeout(timer);
    } finally {
      watch.stop();
    }
  }
}
