/** One server-sent event. `id` and `event` are single lines; `data` may span lines (one `data:` each). */
export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

const HEARTBEAT = ": heartbeat\n\n";

function format(m: SseMessage): string {
  let text = m.event ? `event: ${m.event}\n` : "";
  for (const line of m.data.split(/\r\n|\r|\n/)) text += `data: ${line}\n`;
  if (m.id) text += `id: ${m.id}\n`;
  return `${text}\n`;
}

/**
 * A `text/event-stream` response that pulls the next item from `items` only when the
 * client has taken the last one; `null` sends a heartbeat comment. `onEnd` runs once, however
 * the stream ends (done, client gone, error); an error ends the stream (the client resumes with
 * Last-Event-ID) and goes to `onError`.
 *
 * One ReadableStream rather than hono's streamSSE (a TransformStream with its writer and a
 * callback left running): a held stream is one of thousands a process may hold, and this costs
 * it about a third less memory.
 */
export function sseResponse<T>(items: AsyncGenerator<T | null>, toMessage: (item: T) => SseMessage, onEnd: () => void, onError: (err: unknown) => void): Response {
  const encoder = new TextEncoder();
  let ended = false;
  let cancelled = false; // the client went away: a pull still under way has no one to answer
  const end = () => {
    if (!ended) onEnd();
    ended = true;
  };
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const next = await items.next();
          if (cancelled) return;
          if (next.done) {
            end();
            controller.close();
          } else {
            controller.enqueue(encoder.encode(next.value === null ? HEARTBEAT : format(toMessage(next.value))));
          }
        } catch (err) {
          end();
          if (cancelled) return;
          onError(err);
          controller.close();
        }
      },
      async cancel() {
        cancelled = true;
        try {
          await items.return(undefined);
        } finally {
          end();
        }
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { headers: SSE_HEADERS });
}

/** The head of an event stream without the stream (a HEAD request: nothing is held or read). */
export function sseHead(): Response {
  return new Response(null, { headers: SSE_HEADERS });
}

const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" };
