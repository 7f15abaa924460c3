// maxBodyBytes (default 16 MiB) is the callback handlers' only guard before the signature is
// checked. A body sent without Content-Length (chunked) must be cut off at the limit, not read
// whole into memory first: anyone who can reach the engine can send one.
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { fetchCallbackHandler, honoCallbackHandler } from "../src/index.ts";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const LIMIT = 64 * 1024;
const CHUNK = new Uint8Array(16 * 1024).fill(0x20);
const TOTAL_CHUNKS = 1024; // 16 MiB offered, 64 KiB allowed

/** A chunked POST body of 16 MiB, counting how much of it the handler pulls. */
function endlessRequest() {
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (pulled >= TOTAL_CHUNKS * CHUNK.length) return controller.close();
      pulled += CHUNK.length;
      controller.enqueue(CHUNK.slice());
    },
  });
  const request = new Request("http://engine/signalbox", { method: "POST", body, duplex: "half" } as RequestInit);
  return { request, pulled: () => pulled };
}

/** The stream pulls a chunk or two ahead of the reader: "about the limit" allows for that. */
function bytesRead(pulled: number): string {
  return pulled <= LIMIT + CHUNK.length * 2 ? "about the limit" : `${pulled} bytes`;
}

describe("callback handlers and a body over maxBodyBytes with no Content-Length", () => {
  it("fetchCallbackHandler answers 413 without reading past the limit", async () => {
    const handler = fetchCallbackHandler({ secret: SECRET, onEvent: () => {}, maxBodyBytes: LIMIT });
    const { request, pulled } = endlessRequest();
    const res = await handler(request);
    expect({ status: res.status, bytesRead: bytesRead(pulled()) }).toEqual({ status: 413, bytesRead: "about the limit" });
  });

  it("honoCallbackHandler answers 413 without reading past the limit", async () => {
    const app = new Hono().post("/signalbox", honoCallbackHandler({ secret: SECRET, onEvent: () => {}, maxBodyBytes: LIMIT }));
    const { request, pulled } = endlessRequest();
    const res = await app.request(request);
    expect({ status: res.status, bytesRead: bytesRead(pulled()) }).toEqual({ status: 413, bytesRead: "about the limit" });
  });
});
