import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import { Hono } from "hono";
import { Webhook } from "standardwebhooks";
import { afterEach, describe, expect, it } from "vitest";
import { expressCallbackHandler, fetchCallbackHandler, honoCallbackHandler, nodeCallbackHandler, type CallbackHandlerOptions, type SignalboxEvent } from "../src/index.ts";

// Each adapter on a real socket, sent requests signed by the reference library.
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const event = { id: "ev_7", type: "signal.timeout", occurred_at: new Date().toISOString(), wait: { id: "wt_7", run_id: "order-7", status: "timed_out" } };
const body = JSON.stringify(event);

function signedHeaders(payload = body, secret = SECRET): Record<string, string> {
  const at = new Date();
  return {
    "content-type": "application/json",
    "webhook-id": event.id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": new Webhook(secret).sign(event.id, at, payload),
  };
}

type Listen = (opts: CallbackHandlerOptions) => Promise<{ url: string; close(): Promise<void> }>;

async function listening(server: Server) {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/signalbox`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const adapters: Record<string, Listen> = {
  "node:http": (opts) => listening(createServer(nodeCallbackHandler(opts))),
  express: (opts) => {
    const app = express();
    app.post("/signalbox", expressCallbackHandler(opts));
    return listening(createServer(app));
  },
  "express with express.raw() on the route": (opts) => {
    const app = express();
    // As the README mounts it: express.raw()'s own limit (100 KB by default) raised to the handler's.
    app.post("/signalbox", express.raw({ type: "application/json", limit: "16mb" }), expressCallbackHandler(opts));
    return listening(createServer(app));
  },
  hono: async (opts) => {
    const app = new Hono();
    // A logger that reads the body first: hono caches it, the handler still gets the same bytes.
    app.use(async (c, next) => {
      await c.req.text();
      await next();
    });
    app.post("/signalbox", honoCallbackHandler(opts));
    const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
    await new Promise<void>((resolve) => server.once("listening", resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/signalbox`, close: () => new Promise<void>((r) => server.close(() => r())) };
  },
  "fetch (Request => Response)": async (opts) => {
    const handler = fetchCallbackHandler(opts);
    const server = serve({ fetch: (req: Request) => handler(req), port: 0, hostname: "127.0.0.1" }) as Server;
    await new Promise<void>((resolve) => server.once("listening", resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/signalbox`, close: () => new Promise<void>((r) => server.close(() => r())) };
  },
};

const open: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

describe.each(Object.entries(adapters))("the %s callback handler", (_name, listen) => {
  async function start(onEvent: CallbackHandlerOptions["onEvent"] = () => {}) {
    const received: SignalboxEvent[] = [];
    const server = await listen({
      secret: SECRET,
      onEvent: async (e) => {
        received.push(e);
        return await onEvent(e);
      },
      onError: () => {},
    });
    open.push(server);
    return { ...server, received };
  }

  it("answers 204 to a genuine callback, after handing over the parsed event", async () => {
    const server = await start();
    const res = await fetch(server.url, { method: "POST", headers: signedHeaders(), body });
    expect(res.status).toBe(204);
    expect(server.received).toEqual([event]);
  });

  it("answers 200 with the JSON onEvent returned: the callback's reply", async () => {
    const server = await start(() => ({ order: "shipped", ids: [1, 2] }));
    const res = await fetch(server.url, { method: "POST", headers: signedHeaders(), body });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ order: "shipped", ids: [1, 2] });
  });

  it("answers 401 to a forged or altered one, without calling onEvent", async () => {
    const server = await start();
    const forged = await fetch(server.url, { method: "POST", headers: signedHeaders(body, "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXkh"), body });
    expect(forged.status).toBe(401);
    expect(await forged.text()).toBe("signature mismatch");
    const altered = await fetch(server.url, { method: "POST", headers: signedHeaders(), body: body.replace("timed_out", "received") });
    expect(altered.status).toBe(401);
    expect(server.received).toEqual([]);
  });

  it("answers 204 to a callback of 200 KB (a wait carries its signal's payload; 413 would be a permanent failure)", async () => {
    const large = { ...event, wait: { ...event.wait, result: { payload: { text: "x".repeat(200 * 1024) } } } };
    const text = JSON.stringify(large);
    const server = await start();
    const res = await fetch(server.url, { method: "POST", headers: signedHeaders(text), body: text });
    expect(res.status).toBe(204);
    expect(server.received).toEqual([large]);
  });

  it("answers 500 when onEvent throws, so signalbox tries again", async () => {
    const server = await start(() => {
      throw new Error("database down");
    });
    const res = await fetch(server.url, { method: "POST", headers: signedHeaders(), body });
    expect(res.status).toBe(500);
  });
});

describe("the express handler behind express.json()", () => {
  it("refuses to guess the bytes a JSON parser threw away, and says how to mount it", async () => {
    const app = express();
    const errors: string[] = [];
    app.use(express.json());
    app.post("/signalbox", expressCallbackHandler({ secret: SECRET, onEvent: () => {} }));
    app.use((err: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
      errors.push(err.message);
      res.status(500).end();
    });
    const server = await listening(createServer(app));
    open.push(server);
    const res = await fetch(server.url, { method: "POST", headers: signedHeaders(), body });
    expect(res.status).toBe(500);
    expect(errors[0]).toMatch(/mount the handler before it, or use express.raw/);
  });
});

describe("the node:http handler, whose promise http.createServer drops", () => {
  /** A request and response as node gives them, enough for the handler. */
  function exchange(chunks: () => AsyncGenerator<Uint8Array>, headers: Record<string, string> = signedHeaders()) {
    const req = Object.assign(chunks(), { method: "POST", headers });
    const res = {
      statusCode: 0,
      headersSent: false,
      destroyed: false,
      body: undefined as string | undefined,
      setHeader: () => {},
      end(chunk?: string) {
        this.headersSent = true;
        this.body = chunk;
      },
      destroy() {
        this.destroyed = true;
      },
    };
    return { req, res };
  }
  const whole = async function* () {
    yield new TextEncoder().encode(body);
  };

  it("never rejects: a client hanging up mid-body gets its response destroyed, and nothing is reported", async () => {
    const errors: unknown[] = [];
    const { req, res } = exchange(async function* () {
      yield new TextEncoder().encode('{"a');
      throw Object.assign(new Error("aborted"), { code: "ECONNRESET" });
    });
    await expect(nodeCallbackHandler({ secret: SECRET, onEvent: () => {}, onError: (e) => errors.push(e) })(req, res)).resolves.toBeUndefined();
    expect({ destroyed: res.destroyed, answered: res.headersSent, errors }).toEqual({ destroyed: true, answered: false, errors: [] });
  });

  it("never rejects: a secret that is not whsec_ and base64, or a reply that is not JSON, answers 500 and is reported", async () => {
    const cases = {
      "a malformed secret": { secret: "not a secret!", onEvent: () => {} },
      "a reply JSON cannot hold": { secret: SECRET, onEvent: () => ({ big: 1n }) },
    };
    const outcomes: Record<string, unknown> = {};
    for (const [name, o] of Object.entries(cases)) {
      const errors: unknown[] = [];
      const { req, res } = exchange(whole);
      await expect(nodeCallbackHandler({ ...o, onError: (e) => errors.push(e) })(req, res)).resolves.toBeUndefined();
      outcomes[name] = { status: res.statusCode, reported: errors.map((e) => (e as Error).name) };
    }
    expect(outcomes).toEqual({
      "a malformed secret": { status: 500, reported: ["TypeError"] },
      "a reply JSON cannot hold": { status: 500, reported: ["TypeError"] },
    });
  });
});
