import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { waitFor } from "./wait-for.ts";

export interface ReceivedCallback {
  headers: IncomingHttpHeaders;
  body: string;
  json: { id: string; type: string; occurred_at: string; wait: Record<string, unknown> & { id: string; status: string } };
  at: number;
}

/** An answer with a body: a JSON one is the callback's reply. */
export interface CallbackAnswer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

/** A JSON answer (the callback's reply). */
export const jsonAnswer = (value: unknown, status = 200): CallbackAnswer => ({ status, headers: { "content-type": "application/json" }, body: JSON.stringify(value) });

/**
 * A workflow engine stand-in: records every callback and answers with `respond` (default 204):
 * a status, or a status with headers and a body. `respond` may return a promise to hold the
 * answer (an engine that hangs mid-delivery).
 */
export async function startCallbackReceiver(respond: (n: number, cb: ReceivedCallback) => number | CallbackAnswer | Promise<number | CallbackAnswer> = () => 204) {
  const received: ReceivedCallback[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const cb: ReceivedCallback = { headers: req.headers, body, json: JSON.parse(body), at: performance.now() };
      received.push(cb);
      void Promise.resolve(respond(received.length, cb)).then((answer) => {
        const a = typeof answer === "number" ? { status: answer } : answer;
        res.writeHead(a.status, a.headers);
        res.end(a.body);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/resume`;
  return {
    url,
    received,
    /** Resolves once `n` callbacks have arrived (rejects after `timeoutMs`). */
    waitFor: (n: number, timeoutMs = 10_000): Promise<ReceivedCallback[]> =>
      waitFor(`${n} callbacks`, () => received, { until: (cbs) => cbs.length >= n, timeoutMs, intervalMs: 5 }).catch(() => {
        throw new Error(`expected ${n} callbacks, got ${received.length}: ${received.map((cb) => `${cb.json.type} ${cb.json.wait?.id ?? cb.body.slice(0, 80)}`).join(", ")}`);
      }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
