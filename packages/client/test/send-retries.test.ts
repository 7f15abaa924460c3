import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../src/core/free-port.ts";
import { API_KEY, startTestApp, type TestApp } from "../../../test/helpers/test-app.ts";
import { createClient, SignalboxConnectionError, SignalboxProblem } from "../src/index.ts";

/** What the proxy does with the n-th request (1-based). */
type Fault = "forward" | "lose-the-answer" | "unavailable" | "html-500";

/**
 * A proxy in front of signalbox that misbehaves on cue, as the network and load balancers do:
 * it can forward a request and then cut the connection before the answer reaches the client
 * (the signal is committed, the client cannot know), or answer 503 itself.
 */
async function startFaultyProxy(target: string, faults: Fault[]) {
  const seen: IncomingHttpHeaders[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      seen.push(req.headers);
      const fault = faults[seen.length - 1] ?? "forward";
      if (fault === "unavailable") {
        res.writeHead(503, { "content-type": "application/problem+json", "retry-after": "0" });
        return res.end(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503, detail: "database unavailable" }));
      }
      if (fault === "html-500") {
        res.writeHead(500, { "content-type": "text/html" });
        return res.end("<html><body>upstream error</body></html>");
      }
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== "host" && k !== "connection" && k !== "content-length")) as Record<string, string>;
      const answer = await fetch(target + req.url, { method: req.method, headers, body: Buffer.concat(chunks) });
      const text = await answer.text();
      if (fault === "lose-the-answer") return req.socket.destroy(); // committed upstream; the client sees a reset
      res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let app: TestApp;
let proxies: Array<{ close(): Promise<void> }> = [];

async function clientBehind(faults: Fault[]) {
  const proxy = await startFaultyProxy(app.baseUrl, faults);
  proxies.push(proxy);
  return { proxy, client: createClient({ baseUrl: proxy.url, token: API_KEY, retry: { baseDelayMs: 1 } }) };
}

beforeAll(async () => {
  app = await startTestApp();
  const setup = createClient({ baseUrl: app.baseUrl, token: API_KEY });
  await setup.signalTypes.put("payment", { auth: { scheme: "none" }, buffer_ttl_s: 3600 });
});

afterAll(async () => {
  await Promise.all(proxies.map((p) => p.close()));
  await app?.close();
});

describe("signals.send retries safely", () => {
  it("after an answer lost on the way back: the retry, with the same key, is a duplicate of the committed signal", async () => {
    const { proxy, client } = await clientBehind(["lose-the-answer"]);
    const sent = await client.signals.send("pay-1", "payment", { amount: 10 });
    expect(sent.outcome).toBe("duplicate");
    expect(proxy.seen.map((h) => h["idempotency-key"])).toEqual([sent.idempotency_key, sent.idempotency_key]);

    const log = await createClient({ baseUrl: app.baseUrl, token: API_KEY }).signals.ofRun("pay-1");
    expect(log.items.map((s) => [s.id, s.sequence, s.outcome])).toEqual([[sent.signal_id, 1, "buffered"]]);
  });

  it("after a 503: sent again with the same key, accepted once", async () => {
    const { proxy, client } = await clientBehind(["unavailable", "unavailable"]);
    const sent = await client.signals.send("pay-2", "payment", { amount: 20 }, { idempotencyKey: "invoice-20" });
    expect(sent).toMatchObject({ outcome: "buffered", sequence: 1, idempotency_key: "invoice-20" });
    expect(proxy.seen.map((h) => h["idempotency-key"])).toEqual(["invoice-20", "invoice-20", "invoice-20"]);
  });

  it("never after an answer about the request itself (a 4xx, a 500)", async () => {
    const { proxy, client } = await clientBehind([]);
    const err = await client.signals.send("pay-3", "no-such-type", {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SignalboxProblem);
    expect(proxy.seen).toHaveLength(1);

    const broken = await clientBehind(["html-500"]);
    const html = await broken.client.signals.send("pay-3", "payment", {}).catch((e: unknown) => e);
    // Not a problem document: the status line stands in for it.
    expect(html).toMatchObject({ status: 500, title: "Internal Server Error", detail: "<html><body>upstream error</body></html>" });
    expect(broken.proxy.seen).toHaveLength(1);
  });

  it("gives up after its attempts when nothing answers, with SignalboxConnectionError", async () => {
    const port = await freePort();
    const client = createClient({ baseUrl: `http://127.0.0.1:${port}`, token: API_KEY, retry: { attempts: 3, baseDelayMs: 1 } });
    const err = await client.signals.send("pay-4", "payment", {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SignalboxConnectionError);
    expect((err as Error).message).toBe(`signalbox unreachable at http://127.0.0.1:${port}: ECONNREFUSED`);
  });
});
