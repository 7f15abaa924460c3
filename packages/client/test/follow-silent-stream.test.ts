// runs.follow (and `signalbox tail`, built on it) on a connection that goes silent without
// closing: a NAT or load balancer dropping state, a failover. signalbox sends a heartbeat comment
// every SIGNALBOX_SSE_HEARTBEAT_S; when nothing comes for longer than idleTimeoutMs, the stream
// is dead and must be reconnected, or the follower looks alive and never yields another event.
import { createServer } from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY, startTestApp, type TestApp } from "../../../test/helpers/test-app.ts";
import { waitFor } from "../../../test/helpers/wait-for.ts";
import { createClient, SignalboxConnectionError, type RunEvent } from "../src/index.ts";

const HEARTBEAT_S = 0.5;
const IDLE_TIMEOUT_MS = 1_500; // three heartbeats, as the default (45 s) is three of 15 s

/** A TCP proxy whose first connection, once frozen, forwards nothing more either way (and never closes). */
async function startFreezingProxy(target: { host: string; port: number }) {
  let connections = 0;
  let frozen = false;
  const sockets: net.Socket[] = [];
  const server = net.createServer((client) => {
    const n = ++connections;
    const upstream = net.connect(target.port, target.host);
    sockets.push(client, upstream);
    const blocked = () => frozen && n === 1;
    client.on("data", (d) => void (!blocked() && upstream.write(d)));
    upstream.on("data", (d) => void (!blocked() && client.write(d)));
    client.on("error", () => upstream.destroy());
    upstream.on("error", () => client.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    freeze: () => (frozen = true),
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * A signalbox that froze (SIGSTOP, a hung VM) while a run was followed: its first stream sends one
 * event and goes silent, and every later request is accepted and never answered, not even its headers.
 */
async function startFreezingSignalbox() {
  let requests = 0;
  const server = createServer((_req, res) => {
    if (++requests > 1) return;
    res.writeHead(200, { "content-type": "text/event-stream" });
    const event = { id: "ev_1", run_id: "r", type: "signal.waiting", occurred_at: new Date().toISOString(), wait_id: null, signal_id: null, data: {} };
    res.write(`event: signal.waiting\ndata: ${JSON.stringify(event)}\nid: ev_1\n\n`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_SSE_HEARTBEAT_S: String(HEARTBEAT_S) } });
});
afterAll(async () => {
  await app?.close();
});

describe("runs.follow on a stream that goes silent", () => {
  it("keeps a stream that only sends heartbeats, and reconnects one that sends nothing, yielding the next event", async () => {
    const direct = createClient({ baseUrl: app.baseUrl, token: API_KEY });
    await direct.signalTypes.put("ship", { auth: { scheme: "none" } });
    await direct.waits.open("parcel-silent", { signal: "ship" });
    const target = new URL(app.baseUrl);
    const proxy = await startFreezingProxy({ host: target.hostname, port: Number(target.port) });
    const client = createClient({ baseUrl: proxy.url, token: API_KEY });
    const stop = new AbortController();
    const seen: RunEvent[] = [];
    const following = (async () => {
      for await (const event of client.runs.follow("parcel-silent", { signal: stop.signal, idleTimeoutMs: IDLE_TIMEOUT_MS })) seen.push(event);
    })();
    try {
      await waitFor("the first event", () => seen.length, { until: (n) => n === 1 });
      // No events for longer than the idle limit, but heartbeats: the same connection stays.
      await new Promise((r) => setTimeout(r, IDLE_TIMEOUT_MS * 2));
      const connectionsWhileHeartbeating = proxy.connections();
      proxy.freeze(); // the connection stays open; nothing more passes
      await direct.signals.send("parcel-silent", "ship", {});
      const got = await waitFor("the signal.received event", () => seen.map((e) => e.type), { until: (t) => t.includes("signal.received"), timeoutMs: 20_000 }).catch(
        () => `after 20 s (heartbeat ${HEARTBEAT_S} s, idle limit ${IDLE_TIMEOUT_MS} ms): ${JSON.stringify(seen.map((e) => e.type))}, connections made: ${proxy.connections()}`,
      );
      expect({ connectionsWhileHeartbeating, got }).toEqual({ connectionsWhileHeartbeating: 1, got: ["signal.waiting", "signal.received"] });
    } finally {
      stop.abort();
      await proxy.close();
      await following.catch(() => {});
    }
  }, 60_000);

  it("gives up on a reconnection that gets no answer within the idle limit, and after its attempts throws", async () => {
    const frozen = await startFreezingSignalbox();
    try {
      const events = createClient({ baseUrl: frozen.url, token: API_KEY }).runs.follow("r", { idleTimeoutMs: 500, reconnectAttempts: 1 });
      expect((await events.next()).value).toMatchObject({ id: "ev_1" });
      const outcome = await Promise.race([events.next().catch((e: unknown) => e), new Promise((r) => setTimeout(() => r("still following after 10 s"), 10_000))]);
      expect(outcome, `${frozen.requests()} requests`).toBeInstanceOf(SignalboxConnectionError);
      expect(frozen.requests()).toBe(3); // the stream, then a reconnection and its one retry, each cut after 500 ms
    } finally {
      await frozen.close();
    }
  }, 30_000);
});
