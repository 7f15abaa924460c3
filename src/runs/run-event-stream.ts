import type { Deps } from "../deps.ts";
import type { ChangeFeed } from "../events/change-feed.ts";
import { sseHead, sseResponse, type SseMessage } from "../http/sse.ts";
import { streamRunEvents, type EventResource } from "./stream-events.ts";

type StreamDeps = Pick<Deps, "db" | "config" | "log"> & { changes: ChangeFeed; shutdown: AbortSignal };

/**
 * A run's history after `afterId`, then its live events, as a `text/event-stream` response: the
 * API's event stream and the console's live history alike. It counts as a held request (503
 * past the cap, before the stream starts) until it ends, and ends when the client goes or the
 * process shuts down. A HEAD gets the head alone: its body would be thrown away unread and
 * never cancelled, and the place it held kept for good.
 */
export function runEventStream(deps: StreamDeps, runId: string, afterId: number, request: Request, toMessage: (event: EventResource) => SseMessage): Response {
  if (request.method === "HEAD") return sseHead();
  const release = deps.changes.admit();
  const signal = AbortSignal.any([request.signal, deps.shutdown]);
  const events = streamRunEvents(deps, runId, afterId, deps.config.SIGNALBOX_SSE_HEARTBEAT_S * 1000, signal);
  return sseResponse(events, toMessage, release, (err) => deps.log.warn({ err: String(err) }, "event stream ended by an error"));
}
