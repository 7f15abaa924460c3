import { describe, expect, it } from "vitest";
import { readServerSentEvents, type ServerSentEvent } from "../src/sse.ts";

/** A body delivered in the given chunks, as a network may split it anywhere. */
function streamOf(chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

async function read(chunks: string[]): Promise<ServerSentEvent[]> {
  const out: ServerSentEvent[] = [];
  for await (const e of readServerSentEvents(streamOf(chunks))) out.push(e);
  return out;
}

describe("readServerSentEvents", () => {
  const text = 'event: signal.waiting\ndata: {"id":"ev_1"}\nid: ev_1\n\n: heartbeat\n\nevent: signal.received\ndata: {"id":"ev_2",\ndata: "x":1}\nid: ev_2\n\n';
  const expected = [
    { event: "signal.waiting", id: "ev_1", data: '{"id":"ev_1"}' },
    { event: "signal.received", id: "ev_2", data: '{"id":"ev_2",\n"x":1}' },
  ];

  it("parses events, joins multi-line data and skips heartbeat comments", async () => {
    expect(await read([text])).toEqual(expected);
  });

  it("gives the same events however the body is split, CRLF line ends included", async () => {
    expect(await read(text.split(""))).toEqual(expected);
    const crlf = text.replace(/\n/g, "\r\n");
    expect(await read(crlf.split(""))).toEqual(expected);
  });

  it("does not dispatch an event the stream cut off before its blank line", async () => {
    expect(await read(['data: {"id":"ev_1"}\n\ndata: {"id":'])).toEqual([{ data: '{"id":"ev_1"}' }]);
  });
});
