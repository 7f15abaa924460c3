import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { body, declareType, intake, openWait } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// An endpoint answers a callback with a status line at once and then a body that
// never ends (a byte every 200 ms). The attempt is decided on the status, but its connection must
// not stay open past the attempt's 10 s time limit: each attempt otherwise leaked a socket for good
// (drained unread, past the limit).

let app: TestApp;
let server: Server;
let url: string;
const open = new Set<Socket>();
const timers: NodeJS.Timeout[] = [];
let status = 503;
let contentType = "text/plain";

beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_DELIVERY_MAX_ATTEMPTS: "2", SIGNALBOX_DELIVERY_ENDPOINT_FAILURES: "1000" } });
  await declareType(app, "approval");
  server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(status, { "content-type": contentType });
      res.write("x");
      timers.push(setInterval(() => res.write("x"), 200));
    });
  });
  server.on("connection", (s: Socket) => {
    open.add(s);
    s.on("close", () => open.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/resume`;
});
afterAll(async () => {
  for (const t of timers) clearInterval(t);
  server?.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
  await app?.close();
});

describe("an answer whose body never ends", () => {
  it("does not keep the attempt's connection open past its time limit", { timeout: 60_000 }, async () => {
    const { body: wait } = await openWait(app, "endless-503", { signal: "approval", callback_url: url }, 201);
    expect((await intake(app, "endless-503", "approval", "{}")).status).toBe(202);
    await waitFor("the delivery given up", async () => (await body(app.api(`/waits/${wait.id}`))).delivery.status, { until: (s) => s === "failed" });
    expect(open.size).toBeGreaterThanOrEqual(1);
    // Well past the 10 s attempt limit of every attempt made.
    await new Promise((r) => setTimeout(r, 14_000));
    expect(open.size, "connections still open to the endpoint 14 s after the attempts").toBe(0);
  });
});
