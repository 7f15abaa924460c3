import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import net, { type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../src/core/free-port.ts";
import { API_KEY, startTestApp, type TestApp } from "../../../test/helpers/test-app.ts";
import { waitFor } from "../../../test/helpers/wait-for.ts";
import { parseRetryAfter } from "../src/http.ts";
import { createClient, SignalboxConnectionError, SignalboxProblem, type RunEvent } from "../src/index.ts";

/** What the proxy does with the n-th request (1-based). */
type Fault = "forward" | "lose-the-answer" | "unavailable" | "html-500" | "cut-after-first-event" | { unavailable: string };

/**
 * A proxy in front of signalbox that misbehaves on cue, as the network and load balancers do:
 * it can forward a request and then cut the connection before the answer reaches the client
 * (the signal is committed, the client cannot know), answer 503 itself, or cut an event stream
 * after its first event.
 */
async function startFaultyProxy(target: string, faults: Fault[]) {
  const seen: Array<{ url: string; headers: IncomingHttpHeaders; at: number }> = [];
  const upstreamUrl = new URL(target);
  const server: Server = createServer((req, res) => {
    seen.push({ url: req.url ?? "", headers: req.headers, at: performance.now() });
    const fault = faults[seen.length - 1] ?? "forward";
    if (fault === "unavailable" || typeof fault === "object") {
      req.resume();
      res.writeHead(503, { "content-type": "application/problem+json", "retry-after": typeof fault === "object" ? fault.unavailable : "0" });
      return res.end(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503, detail: "database unavailable" }));
    }
    if (fault === "html-500") {
      req.resume();
      res.writeHead(500, { "content-type": "text/html" });
      return res.end("<html><body>upstream error</body></html>");
    }
    const upstream = httpRequest({ host: upstreamUrl.hostname, port: upstreamUrl.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      if (fault === "lose-the-answer") {
        answer.resume(); // signalbox has answered, so the signal is committed; the client sees a reset
        return void answer.once("end", () => req.socket.destroy());
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      if (fault !== "cut-after-first-event") return void answer.pipe(res);
      answer.on("data", (chunk: Buffer) => {
        const cut = chunk.includes("data:");
        // Cut once the event has reached the client, as a proxy's idle timeout would.
        res.write(chunk, () => {
          if (!cut) return;
          answer.destroy();
          req.socket.destroy();
        });
      });
    });
    upstream.on("error", () => req.socket.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A server that accepts connections and never sends a byte back, as a frozen host (SIGSTOP, a hung VM) does. */
async function startSilentServer() {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => void sockets.push(s));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const silent = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  proxies.push(silent);
  return silent;
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
    expect(proxy.seen.map((r) => r.headers["idempotency-key"])).toEqual([sent.idempotency_key, sent.idempotency_key]);

    const log = await createClient({ baseUrl: app.baseUrl, token: API_KEY }).signals.ofRun("pay-1");
    expect(log.items.map((s) => [s.id, s.sequence, s.outcome])).toEqual([[sent.signal_id, 1, "buffered"]]);
  });

  it("after a 503: sent again with the same key, accepted once", async () => {
    const { proxy, client } = await clientBehind(["unavailable", "unavailable"]);
    const sent = await client.signals.send("pay-2", "payment", { amount: 20 }, { idempotencyKey: "invoice-20" });
    expect(sent).toMatchObject({ outcome: "buffered", sequence: 1, idempotency_key: "invoice-20" });
    expect(proxy.seen.map((r) => r.headers["idempotency-key"])).toEqual(["invoice-20", "invoice-20", "invoice-20"]);
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

  it("refuses an empty idempotency key, sending nothing: signalbox takes '' for no key, and a retry would record the signal twice", async () => {
    const { proxy, client } = await clientBehind(["lose-the-answer"]);
    await expect(client.signals.send("pay-6", "payment", { amount: 10 }, { idempotencyKey: "" })).rejects.toThrow(TypeError);
    expect(proxy.seen).toHaveLength(0);
    expect((await createClient({ baseUrl: app.baseUrl, token: API_KEY }).signals.ofRun("pay-6")).items).toEqual([]);
  });

  it("never for a request that cannot be made (a key HTTP cannot carry, a payload JSON cannot hold): its TypeError, nothing sent", async () => {
    const { proxy, client } = await clientBehind([]);
    const badKey = await client.signals.send("pay-7", "payment", {}, { idempotencyKey: "订单-17" }).catch((e: unknown) => e);
    expect(badKey).toBeInstanceOf(TypeError);
    const badPayload = await client.signals.send("pay-7", "payment", { amount: 10n }).catch((e: unknown) => e);
    expect(badPayload).toBeInstanceOf(TypeError);
    expect(proxy.seen).toHaveLength(0);
  });

  it("refuses retry attempts that are not a whole number 1 or more (NaN, from an unset variable, retried for ever)", async () => {
    let calls = 0;
    const nowhere = async (): Promise<Response> => {
      calls++;
      throw new TypeError("fetch failed");
    };
    for (const attempts of [Number(undefined), 0, 2.5, -1]) {
      const client = createClient({ baseUrl: "http://signalbox.invalid", fetch: nowhere, retry: { attempts, baseDelayMs: 1, maxDelayMs: 1 } });
      await expect(client.signals.send("pay-8", "payment", {}), String(attempts)).rejects.toThrow(TypeError);
    }
    expect(calls).toBe(0);
  });

  it("gives up after its attempts when nothing answers, with SignalboxConnectionError", async () => {
    const port = await freePort();
    const client = createClient({ baseUrl: `http://127.0.0.1:${port}`, token: API_KEY, retry: { attempts: 3, baseDelayMs: 1 } });
    const err = await client.signals.send("pay-4", "payment", {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SignalboxConnectionError);
    expect((err as Error).message).toBe(`signalbox unreachable at http://127.0.0.1:${port}: ECONNREFUSED`);
  });
});

describe("Retry-After", () => {
  it("is delay-seconds, a fraction of a second tolerated; an HTTP date; anything else is not heeded", () => {
    expect(parseRetryAfter("2")).toBe(2);
    expect(parseRetryAfter(" 2 ")).toBe(2);
    // Not RFC 9110's integer, but its meaning is plain; Date.parse took "1.5" for 5 January 2001.
    expect(parseRetryAfter("1.5")).toBe(1.5);
    expect(parseRetryAfter("0.25")).toBe(0.25);
    const inAMinute = new Date(Date.now() + 60_000).toUTCString();
    expect(parseRetryAfter(inAMinute)).toBeGreaterThan(55);
    expect(parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT")).toBe(0);
    // The client's own backoff, rather than at once (Date.parse read "-1" as 2001) or never.
    for (const nonsense of [null, "", "  ", "-1", "+5", "1e3", ".5", "1.", "1,5", "soon", "9".repeat(400)]) expect(parseRetryAfter(nonsense), String(nonsense)).toBeUndefined();
    expect(parseRetryAfter("86400000")).toBe(86_400_000); // huge but a number: maxDelayMs caps the pause
  });

  it("signals.send waits the fraction of a second a 503 asks for before trying again", async () => {
    const { proxy, client } = await clientBehind([{ unavailable: "1.5" }]);
    const sent = await client.signals.send("pay-5", "payment", {});
    expect(sent.outcome).toBe("buffered");
    expect(proxy.seen).toHaveLength(2);
    expect(proxy.seen[1]!.at - proxy.seen[0]!.at).toBeGreaterThanOrEqual(1400);
  });

  it("waits.waitFor heeds it between long-polls: a full hold budget (503, Retry-After: 1) is not asked again sooner", async () => {
    const direct = createClient({ baseUrl: app.baseUrl, token: API_KEY });
    await direct.signalTypes.put("review", { auth: { scheme: "none" } });
    const wait = await direct.waits.open("doc-9", { signal: "review" });
    await direct.signals.send("doc-9", "review", {});
    const { proxy, client } = await clientBehind([{ unavailable: "1" }]);
    expect(await client.waits.waitFor(wait.id, { timeoutMs: 10_000 })).toMatchObject({ status: "received" });
    expect(proxy.seen).toHaveLength(2);
    expect(proxy.seen[1]!.at - proxy.seen[0]!.at).toBeGreaterThanOrEqual(950);
  });

  it("runs.follow heeds it before reconnecting", async () => {
    const direct = createClient({ baseUrl: app.baseUrl, token: API_KEY });
    await direct.signalTypes.put("pack", { auth: { scheme: "none" } });
    await direct.waits.open("parcel-9", { signal: "pack" });
    const { proxy, client } = await clientBehind(["cut-after-first-event", { unavailable: "1" }]);
    const stop = new AbortController();
    const following = (async () => {
      for await (const event of client.runs.follow("parcel-9", { signal: stop.signal })) if (event.type === "signal.received") stop.abort();
    })();
    await waitFor("the stream to be reconnected after the 503", () => proxy.seen.length, { until: (n) => n === 3 });
    await direct.signals.send("parcel-9", "pack", {});
    await following;
    expect(proxy.seen[2]!.at - proxy.seen[1]!.at).toBeGreaterThanOrEqual(950);
  });
});

describe("reading through failures", () => {
  it("waits.waitFor keeps long-polling through 503s and returns the resolved wait", async () => {
    const direct = createClient({ baseUrl: app.baseUrl, token: API_KEY });
    await direct.signalTypes.put("approval", { auth: { scheme: "none" } });
    const wait = await direct.waits.open("doc-1", { signal: "approval" });
    await direct.signals.send("doc-1", "approval", { ok: true });
    const { proxy, client } = await clientBehind(["unavailable", "unavailable"]);
    expect(await client.waits.waitFor(wait.id, { timeoutMs: 10_000 })).toMatchObject({ id: wait.id, status: "received" });
    expect(proxy.seen).toHaveLength(3);
  });

  it("waits.waitFor gives up by its timeout on a signalbox that accepts the connection and never answers (a frozen host)", async () => {
    const silent = await startSilentServer();
    const client = createClient({ baseUrl: silent.url, token: API_KEY });
    const started = performance.now();
    const err = await Promise.race([
      client.waits.waitFor("wt_x", { timeoutMs: 1000 }).catch((e: unknown) => e),
      new Promise((r) => setTimeout(() => r("still waiting after 10 s"), 10_000)),
    ]);
    // No answer at all: not a WaitTimeoutError, which says the wait was read still waiting.
    expect(err).toBeInstanceOf(SignalboxConnectionError);
    expect((err as Error).message).toMatch(/no answer within \d+ ms/);
    expect(performance.now() - started).toBeLessThan(8000);
  }, 15_000);

  it("runs.follow reconnects after a dropped stream, after the last event it saw: none missed, none twice", async () => {
    const direct = createClient({ baseUrl: app.baseUrl, token: API_KEY });
    await direct.signalTypes.put("ship", { auth: { scheme: "none" } });
    await direct.waits.open("parcel-1", { signal: "ship" });
    const { proxy, client } = await clientBehind(["cut-after-first-event"]);
    const stop = new AbortController();
    const seen: RunEvent[] = [];
    const following = (async () => {
      for await (const event of client.runs.follow("parcel-1", { signal: stop.signal })) {
        seen.push(event);
        if (event.type === "signal.received") stop.abort();
      }
    })();
    await waitFor("the stream to be reconnected", () => proxy.seen.length, { until: (n) => n === 2 });
    await direct.signals.send("parcel-1", "ship", {});
    await following;
    expect(seen.map((e) => e.type)).toEqual(["signal.waiting", "signal.received"]);
    expect(proxy.seen[1]!.url).toBe(`/runs/parcel-1/events?after=${seen[0]!.id}`);
  });
});
