import type { Client } from "openapi-fetch";
import type { paths } from "./generated/openapi.ts";
import { problemFrom, sendRequest } from "./http.ts";
import { SignalboxConnectionError, SignalboxProblem } from "./problem.ts";
import { delayAfter, pause } from "./retry.ts";
import { readServerSentEvents } from "./sse.ts";
import { timeLimit } from "./time-limit.ts";
import type { RunEvent } from "./types.ts";

export interface FollowOptions {
  /** Start after this event id (default: the run's whole history first). */
  after?: string;
  /** Stops following; the generator then returns. */
  signal?: AbortSignal;
  /** Consecutive failed reconnections after which the error is thrown (default 10). */
  reconnectAttempts?: number;
  /**
   * Reconnect (after the last event seen) when nothing at all arrives for this long, heartbeats
   * included: a connection that went silent without closing (a NAT or load balancer that dropped
   * it, a failover) would otherwise wait for good. Default 45000: three of signalbox's heartbeats
   * at its default SIGNALBOX_SSE_HEARTBEAT_S of 15; raise it if the server's is longer. Infinity:
   * never. Also the longest wait for a connection's answer (its headers): a server that accepts
   * connections and never answers (frozen) fails the attempt.
   */
  idleTimeoutMs?: number;
}

const DEFAULT_IDLE_TIMEOUT_MS = 45_000;

/**
 * A run's history and then its live events, from `GET /runs/{run}/events` as an event stream.
 * When the stream drops (a restart, a proxy's idle timeout) or goes silent (not even a heartbeat
 * for `idleTimeoutMs`) it reconnects after the last event seen, so no event is missed or
 * repeated. The first connection is not retried: a wrong URL or token fails at once.
 */
export async function* followRunEvents(api: Client<paths>, baseUrl: string, run: string, o: FollowOptions = {}): AsyncGenerator<RunEvent> {
  let after = o.after;
  let failures = 0;
  let connected = false;
  const idleTimeoutMs = o.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  while (!o.signal?.aborted) {
    let body: ReadableStream<Uint8Array>;
    // Only until the headers come: the body has its own limit between two chunks, below.
    const limit = headersLimit(idleTimeoutMs, o.signal);
    try {
      const { data, error, response } = await sendRequest(
        baseUrl,
        () =>
          api.GET("/runs/{run}/events", {
            params: { path: { run }, query: after === undefined ? {} : { after } },
            headers: { accept: "text/event-stream" },
            parseAs: "stream",
            signal: limit.signal,
          }),
        limit.signal,
      );
      if (!response.ok || !data) throw problemFrom(response, error);
      body = data;
    } catch (err) {
      if (o.signal?.aborted) return;
      const transient = err instanceof SignalboxConnectionError || (err instanceof SignalboxProblem && err.status >= 500);
      if (!connected || !transient || ++failures > (o.reconnectAttempts ?? 10)) throw err;
      await pause(delayAfter(err, 250 * 2 ** (failures - 1), 5000), o.signal).catch(() => {});
      continue;
    } finally {
      limit.clear();
    }
    connected = true;
    failures = 0;
    try {
      for await (const message of readServerSentEvents(body, { idleTimeoutMs })) {
        const event = JSON.parse(message.data) as RunEvent;
        after = event.id;
        yield event;
      }
    } catch {
      // The stream broke mid-way, or went silent (StreamIdleError; the reader is cancelled, which
      // closes the connection): reconnect after the last event seen, below.
    }
    if (o.signal?.aborted) return;
    // Ended by the server (a restart): a moment's pause, so a server closing every stream at
    // once is not asked again in a tight loop.
    await pause(250, o.signal).catch(() => {});
  }
}

/** The idle limit as a time limit on one request (none when it is unset, 0 or Infinity, as for the body). */
function headersLimit(ms: number, signal: AbortSignal | undefined): { signal: AbortSignal | undefined; clear(): void } {
  return ms > 0 && Number.isFinite(ms) ? timeLimit(ms, signal) : { signal, clear: () => {} };
}
