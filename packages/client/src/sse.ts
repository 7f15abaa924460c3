/** One server-sent event, as the `text/event-stream` format defines it. */
export interface ServerSentEvent {
  id?: string;
  event?: string;
  data: string;
}

export interface ReadOptions {
  /**
   * Throws `StreamIdleError` (and cancels the body) when no byte at all, heartbeat comments
   * included, arrives for this long: a connection that went silent without closing. Unset,
   * 0 or Infinity: no limit.
   */
  idleTimeoutMs?: number;
}

/** No byte arrived on the stream within `idleTimeoutMs`. */
export class StreamIdleError extends Error {
  override readonly name = "StreamIdleError";
  constructor(ms: number) {
    super(`nothing received on the event stream for ${ms} ms`);
  }
}

/**
 * Parses a `text/event-stream` body into events as they arrive. Comment lines (signalbox's
 * heartbeats) are skipped; an event with no `data` line is not dispatched (per the format).
 */
export async function* readServerSentEvents(body: ReadableStream<Uint8Array>, o: ReadOptions = {}): AsyncGenerator<ServerSentEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event: ServerSentEvent = { data: "" };
  let data: string[] = [];
  try {
    for (;;) {
      const { done, value } = await readWithin(reader, o.idleTimeoutMs);
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A CR that ends the chunk may be the first half of a CRLF: wait for the next chunk.
        if (buffer[newline] === "\r" && newline === buffer.length - 1) break;
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line === "") {
          if (data.length > 0) yield { ...event, data: data.join("\n") };
          event = { data: "" };
          data = [];
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") data.push(value);
        else if (field === "id") event.id = value;
        else if (field === "event") event.event = value;
      }
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/**
 * The next chunk, or a `StreamIdleError` after `ms` without one. Only time spent waiting for the
 * network counts: the time a consumer takes between two reads does not.
 */
function readWithin(reader: ReadableStreamDefaultReader<Uint8Array>, ms: number | undefined): ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]> {
  if (ms === undefined || !(ms > 0) || !Number.isFinite(ms)) return reader.read();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const idle = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new StreamIdleError(ms)), ms)));
  // The read left pending when the time runs out settles when the caller cancels the reader.
  return Promise.race([reader.read(), idle]).finally(() => clearTimeout(timer));
}
