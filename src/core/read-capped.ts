import type { Readable } from "node:stream";

/** Reads a body stream whole, or returns null as soon as it passes `maxBytes` (the rest is not read). */
export async function readCapped(body: ReadableStream<Uint8Array> | null, maxBytes: number): Promise<Uint8Array | null> {
  const reader = body?.getReader();
  if (!reader) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(chunks);
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
}

/**
 * readCapped for Node's own request stream (what @hono/node-server serves), read as it comes: a
 * web ReadableStream made over it (a Request's body) cost about a tenth of the service's CPU at
 * intake. Past `maxBytes` it stops collecting and returns null; the server drains or closes the
 * rest after the answer, as it does for any body left unread. A client that hangs up midway is
 * the ECONNRESET "aborted" error Node gives.
 */
export function readStreamCapped(incoming: Readable, maxBytes: number): Promise<Uint8Array | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      incoming.off("data", onData);
      incoming.off("end", onEnd);
      incoming.off("error", onError);
      incoming.off("close", onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBytes) return void chunks.push(chunk);
      stop();
      resolve(null);
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      stop();
      reject(err);
    };
    const onClose = () => onError(Object.assign(new Error("aborted"), { code: "ECONNRESET" }));
    incoming.on("data", onData);
    incoming.on("end", onEnd);
    incoming.on("error", onError);
    incoming.on("close", onClose);
  });
}
