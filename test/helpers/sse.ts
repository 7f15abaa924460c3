import { waitFor } from "./wait-for.ts";

/** A minimal SSE reader over fetch: collects events (and comment lines) as they arrive. */
export interface SseEvent {
  id?: string;
  event?: string;
  data: string;
}

export function openSse(url: string, headers: Record<string, string>) {
  const controller = new AbortController();
  const events: SseEvent[] = [];
  const comments: string[] = [];
  let status = 0;
  const done = (async () => {
    const res = await fetch(url, { headers: { accept: "text/event-stream", ...headers }, signal: controller.signal });
    status = res.status;
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event: SseEvent = { data: "" };
        const data: string[] = [];
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) comments.push(line);
          else if (line.startsWith("id:")) event.id = line.slice(3).trim();
          else if (line.startsWith("event:")) event.event = line.slice(6).trim();
          else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
        }
        if (data.length > 0) {
          event.data = data.join("\n");
          events.push(event);
        }
      }
    }
  })().catch((err) => {
    if ((err as Error).name !== "AbortError") throw err;
  });
  return {
    events,
    comments,
    get status() {
      return status;
    },
    /** Resolves once `predicate` holds for what has arrived (rejects after `timeoutMs`). */
    async until(predicate: () => boolean, timeoutMs = 10_000): Promise<void> {
      await waitFor("an SSE condition", predicate, { timeoutMs, intervalMs: 5, context: () => `events so far: ${events.map((e) => e.event).join(", ")}` });
    },
    close() {
      controller.abort();
      return done;
    },
    done,
  };
}
