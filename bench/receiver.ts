import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { dechunk } from "./http-client.ts";
import { now } from "./stats.ts";

export interface Arrival {
  /** `now()` when the whole callback request had arrived. */
  at: number;
  type: string;
}

/**
 * The workflow engine's side of resume delivery: records when each wait's callback arrives
 * (first arrival wins; repeats are counted) and answers 204. A bare HTTP/1.1 server on raw
 * sockets (keep-alive, Content-Length or chunked bodies): Node's http server would cost this
 * process, which shares the broker's cores, several times more CPU per callback. The resume
 * latency phase uses `startNodeHttp()` instead: an ordinary Node `http` server, as an engine's
 * would be (the condition for that figure).
 */
export class CallbackReceiver {
  readonly arrivals = new Map<string, Arrival>();
  duplicates = 0;
  malformed = 0;
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();
  readonly #listeners = new Set<(waitId: string) => void>();
  url = "";

  private constructor(nodeHttp = false) {
    if (nodeHttp) {
      this.#server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          this.#record(Buffer.concat(chunks));
          res.statusCode = 204;
          res.end();
        });
      });
      this.#server.on("connection", (socket: net.Socket) => {
        this.#sockets.add(socket);
        socket.on("close", () => this.#sockets.delete(socket));
      });
      return;
    }
    this.#server = net.createServer((socket) => {
      this.#sockets.add(socket);
      socket.setNoDelay(true);
      let buffer: Buffer = Buffer.alloc(0);
      socket.on("data", (chunk: Buffer) => {
        buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
        for (;;) {
          const request = takeRequest(buffer);
          if (!request) break;
          buffer = request.rest;
          this.#record(request.body);
          socket.write("HTTP/1.1 204 No Content\r\nconnection: keep-alive\r\n\r\n");
        }
      });
      socket.on("error", () => {});
      socket.on("close", () => this.#sockets.delete(socket));
    });
  }

  #record(body: Buffer) {
    const at = now();
    try {
      const parsed = JSON.parse(body.toString("utf8")) as { type?: string; wait?: { id?: string } };
      const id = parsed.wait?.id;
      if (typeof id !== "string") throw new Error("no wait id");
      if (this.arrivals.has(id)) this.duplicates++;
      else {
        this.arrivals.set(id, { at, type: String(parsed.type) });
        for (const l of this.#listeners) l(id);
      }
    } catch {
      this.malformed++;
    }
  }

  static start(): Promise<CallbackReceiver> {
    return CallbackReceiver.#listen(new CallbackReceiver());
  }

  /** The same on an ordinary Node `http` server. */
  static startNodeHttp(): Promise<CallbackReceiver> {
    return CallbackReceiver.#listen(new CallbackReceiver(true));
  }

  static async #listen(r: CallbackReceiver): Promise<CallbackReceiver> {
    await new Promise<void>((resolve) => r.#server.listen(0, "127.0.0.1", resolve));
    r.url = `http://127.0.0.1:${(r.#server.address() as AddressInfo).port}/resume`;
    return r;
  }

  /** Resolves with how many of `ids` are still missing once all arrived or `timeoutMs` passed. */
  waitFor(ids: Iterable<string>, timeoutMs: number, onProgress?: (missing: number) => void): Promise<number> {
    const missing = new Set<string>();
    for (const id of ids) if (!this.arrivals.has(id)) missing.add(id);
    if (missing.size === 0) return Promise.resolve(0);
    return new Promise((resolve) => {
      const listener = (id: string) => {
        if (missing.delete(id) && missing.size === 0) done();
      };
      const progress = onProgress ? setInterval(() => onProgress(missing.size), 5000) : undefined;
      const timer = setTimeout(() => done(), timeoutMs);
      const done = () => {
        clearTimeout(timer);
        clearInterval(progress);
        this.#listeners.delete(listener);
        resolve(missing.size);
      };
      this.#listeners.add(listener);
    });
  }

  close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}

/** One whole request at the start of `buf` (its body and what follows), or undefined if incomplete. */
function takeRequest(buf: Buffer): { body: Buffer; rest: Buffer } | undefined {
  const headEnd = buf.indexOf("\r\n\r\n");
  if (headEnd < 0) return undefined;
  const head = buf.subarray(0, headEnd).toString("latin1");
  const length = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (length) {
    const end = headEnd + 4 + Number(length[1]);
    return buf.length < end ? undefined : { body: buf.subarray(headEnd + 4, end), rest: buf.subarray(end) };
  }
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
    const parsed = dechunk(buf, headEnd + 4);
    return parsed && { body: parsed[0], rest: parsed[1] };
  }
  return { body: Buffer.alloc(0), rest: buf.subarray(headEnd + 4) };
}
