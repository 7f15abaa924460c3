import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/wait-for.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";

const ATTACKER = "127.0.0.2"; // loopback too, but another address than the probes' 127.0.0.1

/** Opens a connection from `localAddress` and starts a request that never finishes: headers only, or a body that trickles. */
function slowClient(port: number, localAddress: string, what: "headers" | "body"): Promise<Socket> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port, localAddress }, () => {
      socket.write(what === "headers" ? "POST /signals/r/s HTTP/1.1\r\nHost: x\r\n" : "POST /signals/r/s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{");
      resolve(socket);
    });
    socket.on("error", () => {});
    socket.resume(); // read what the server says (a 408, its close)
  });
}

describe("slow clients", () => {
  let app: TestApp;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    app = await startTestApp({
      env: { SIGNALBOX_MAX_CONNECTIONS_PER_ADDRESS: "100", SIGNALBOX_HEADERS_TIMEOUT_S: "1", SIGNALBOX_REQUEST_TIMEOUT_S: "2" },
    });
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await app.close();
  });

  it("one address holds at most its share; /healthz, /readyz and management calls from others answer", async () => {
    const port = Number(new URL(app.baseUrl).port);
    for (let i = 0; i < 1_000; i++) sockets.push(await slowClient(port, ATTACKER, i % 2 ? "headers" : "body"));
    await waitFor("the attacker down to its share", () => app.openConnections(ATTACKER), { until: (n) => n <= 100 });
    expect(app.openConnections(ATTACKER)).toBeLessThanOrEqual(100);
    // The rest were closed at once.
    await waitFor("the attacker's sockets closed down to its share", () => sockets.filter((s) => !s.destroyed).length, { until: (n) => n <= 100 });

    expect((await fetch(`${app.baseUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${app.baseUrl}/readyz`)).status).toBe(200);
    expect((await app.api("/signal-types")).status).toBe(200);
  });

  it("a request whose headers or body never finish is closed after the configured time", async () => {
    const port = Number(new URL(app.baseUrl).port);
    const [headers, body] = [await slowClient(port, "127.0.0.3", "headers"), await slowClient(port, "127.0.0.3", "body")];
    const closed = (s: Socket) => new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once("close", () => resolve())));
    await Promise.all([closed(headers), closed(body)]); // headers timeout 1 s, request timeout 2 s (the test's own limit is 30 s)
    expect(app.openConnections("127.0.0.3")).toBe(0);
  });
});

describe("slow clients from many addresses, past the connection cap", () => {
  const CAP = 200;
  let app: TestApp;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    app = await startTestApp({ env: { SIGNALBOX_MAX_CONNECTIONS: String(CAP), SIGNALBOX_MAX_CONNECTIONS_PER_ADDRESS: "20" } });
    await declareType(app, "slow");
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await app.close();
  });

  it("make room by closing the oldest unanswered connection: probes, management calls and held long-polls go on", async () => {
    const port = Number(new URL(app.baseUrl).port);
    const waitId = (await openWait(app, "loris-run", { signal: "slow" })).body.id as string;
    // A long-poll from before the attack: the oldest connection, being answered, never closed to make room.
    const held = new AbortController();
    const longPoll = fetch(`${app.baseUrl}/waits/${waitId}?wait_s=60`, { headers: { authorization: `Bearer ${API_KEY}` }, signal: held.signal }).then((r) => r.status, () => "closed");
    await waitFor("the long-poll held", () => app.changes.held, { until: (n) => n === 1 });
    // 30 addresses x 20: three times the cap, each address within its share.
    for (let a = 1; a <= 30; a++) for (let i = 0; i < 20; i++) sockets.push(await slowClient(port, `127.0.1.${a}`, i % 2 ? "headers" : "body"));
    await waitFor("a slow socket replaced", () => sockets.filter((s) => !s.destroyed).length, { until: (n) => n < CAP });

    expect((await fetch(`${app.baseUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${app.baseUrl}/readyz`)).status).toBe(200);
    expect((await app.api("/signal-types")).status).toBe(200);
    expect(app.changes.held).toBe(1); // the long-poll is still held
    expect((await intake(app, "loris-run", "slow", "{}")).status).toBe(202);
    expect(await longPoll).toBe(200); // and answers when its wait is received
  });
});
