/**
 * Requests answered in their handler's stead (a 503 once the database stopped answering,
 * src/app.ts): their handlers are told, through `heldSignal`, to stop holding. A handler left
 * holding would keep its place among SIGNALBOX_MAX_HELD_REQUESTS for its whole wait_s (up to a
 * minute), and the clients' retries after a short outage would find the places taken.
 */
const answeredInstead = new WeakMap<Request, AbortController>();

/** Marks `request` as one whose answer may be given in its handler's stead; returns how to say it was. */
export function answerableInstead(request: Request): () => void {
  const controller = new AbortController();
  answeredInstead.set(request, controller);
  return () => controller.abort();
}

/** What ends a held request: its client going, the process shutting down, or its answer given instead. */
export function heldSignal(request: Request, shutdown: AbortSignal): AbortSignal {
  const instead = answeredInstead.get(request)?.signal;
  return AbortSignal.any(instead ? [request.signal, shutdown, instead] : [request.signal, shutdown]);
}
