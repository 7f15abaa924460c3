import http from "node:http";
import type { AddressInfo } from "node:net";
import { now } from "./stats.ts";

export interface Arrival {
  /** `now()` when the whole callback request had arrived. */
  at: number;
  type: string;
}

/**
 * The workflow engine's side of resume delivery: records when each wait's callback arrives
 * (first arrival wins; repeats are counted) and answers 204.
 */
export class CallbackReceiver {
  readonly arrivals = new Map<string, Arrival>();
  duplicates = 0;
  malformed = 0;
  readonly #server: http.Server;
  readonly #listeners = new Set<(waitId: string) => void>();
  url = "";

  private constructor() {
    this.#server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const at = now();
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { type?: string; wait?: { id?: string } };
          const id = body.wait?.id;
          if (typeof id !== "string") throw new Error("no wait id");
          if (this.arrivals.has(id)) this.duplicates++;
          else {
            this.arrivals.set(id, { at, type: String(body.type) });
            for (const l of this.#listeners) l(id);
          }
        } catch {
          this.malformed++;
        }
        res.writeHead(204).end();
      });
    });
    this.#server.keepAliveTimeout = 30_000;
  }

  static async start(): Promise<CallbackReceiver> {
    const r = new CallbackReceiver();
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
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}
