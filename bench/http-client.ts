import net from "node:net";

/**
 * A bare HTTP/1.1 keep-alive client for the load generator. fetch (undici) spends about
 * 0.6-1 ms of CPU per request on these cores, which the broker then cannot use: the figures
 * measured the load generator as much as signalbox. This one writes the request in one buffer
 * and parses just the status line, Content-Length (or chunked) and the body, so the load costs
 * about as little as pgbench's client does for its side of the comparison.
 */
export interface RawResponse {
  status: number;
  body: string;
}

interface Pending {
  resolve: (r: RawResponse) => void;
  reject: (e: Error) => void;
}

class Connection {
  readonly socket: net.Socket;
  #buffer: Buffer = Buffer.alloc(0);
  #pending: Pending | undefined;
  broken = false;

  constructor(host: string, port: number) {
    this.socket = net.connect({ host, port, noDelay: true });
    this.socket.on("data", (chunk: Buffer) => {
      this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
      this.#parse();
    });
    const fail = (err: Error) => {
      this.broken = true;
      const p = this.#pending;
      this.#pending = undefined;
      p?.reject(err);
    };
    this.socket.on("error", fail);
    this.socket.on("close", () => fail(new Error("connection closed")));
  }

  send(request: Buffer): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      this.#pending = { resolve, reject };
      this.socket.write(request);
    });
  }

  #parse() {
    const headEnd = this.#buffer.indexOf("\r\n\r\n");
    if (headEnd < 0) return;
    const head = this.#buffer.subarray(0, headEnd).toString("latin1");
    const status = Number(head.slice(9, 12));
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    let body: Buffer;
    let rest: Buffer;
    if (length) {
      const end = headEnd + 4 + Number(length[1]);
      if (this.#buffer.length < end) return;
      body = this.#buffer.subarray(headEnd + 4, end);
      rest = this.#buffer.subarray(end);
    } else if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
      const parsed = dechunk(this.#buffer, headEnd + 4);
      if (!parsed) return;
      [body, rest] = parsed;
    } else {
      body = Buffer.alloc(0); // 204/304 and friends
      rest = this.#buffer.subarray(headEnd + 4);
    }
    this.#buffer = rest;
    const p = this.#pending;
    this.#pending = undefined;
    p?.resolve({ status, body: body.toString("utf8") });
  }
}

/** The body of a chunked message starting at `from`, and what follows it; undefined if incomplete. */
export function dechunk(buf: Buffer, from: number): [Buffer, Buffer] | undefined {
  const parts: Buffer[] = [];
  let at = from;
  for (;;) {
    const lineEnd = buf.indexOf("\r\n", at);
    if (lineEnd < 0) return undefined;
    const size = parseInt(buf.subarray(at, lineEnd).toString("latin1"), 16);
    if (buf.length < lineEnd + 2 + size + 2) return undefined;
    if (size === 0) return [Buffer.concat(parts), buf.subarray(lineEnd + 4)];
    parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}

/** A pool of keep-alive connections: each request takes an idle one or opens a new one. */
export function rawHttpClient(baseUrl: string, headers: Record<string, string>) {
  const url = new URL(baseUrl);
  const host = url.hostname;
  const port = Number(url.port);
  const fixed = Object.entries({ host: url.host, ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  const idle: Connection[] = [];
  /** `more`: headers of this request alone (e.g. a sender's X-Forwarded-For). */
  return async function request(method: string, path: string, body?: string, more: Record<string, string> = {}): Promise<RawResponse> {
    let conn = idle.pop();
    while (conn?.broken) conn = idle.pop();
    conn ??= new Connection(host, port);
    const payload = body === undefined ? "" : body;
    let extra = "";
    for (const k in more) extra += `${k}: ${more[k]}\r\n`;
    const head = `${method} ${path} HTTP/1.1\r\n${fixed}${extra}${body === undefined ? "" : "content-type: application/json\r\n"}content-length: ${Buffer.byteLength(payload)}\r\n\r\n`;
    const res = await conn.send(Buffer.from(head + payload));
    if (!conn.broken) idle.push(conn);
    return res;
  };
}
