import { spawn } from "node:child_process";
import { request, type ClientRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/wait-for.ts";
import { declareType, openWait, rawRequest } from "../helpers/http.ts";
import { heapKiB } from "../helpers/probes.ts";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";


/**
 * A process that opens N held requests (argv: base URL, path, N, token, Accept) and keeps them
 * open until killed.
 */
const HOLDING_CLIENTS = `
const [base, path, n, token, accept] = process.argv.slice(1);
const url = new URL(base);
const held = [];
for (let i = 0; i < Number(n); i++) {
  const req = require("node:http").request({ host: url.hostname, port: url.port, path, headers: { authorization: "Bearer " + token, accept }, agent: false });
  req.on("error", () => {});
  req.end();
  held.push(req);
}
setInterval(() => {}, 1000);
`;

/** Starts a held request (a long-poll) and returns it, unanswered. */
function holdOpen(app: TestApp, path: string): ClientRequest {
  const url = new URL(app.baseUrl);
  const req = request({ host: url.hostname, port: url.port, path, headers: { authorization: `Bearer ${API_KEY}` }, agent: false });
  req.on("error", () => {});
  req.end();
  return req;
}

describe("requests held open (long-polls, event streams)", () => {
  const CAP = 400;
  let app: TestApp;
  let waitId: string;
  const held: ClientRequest[] = [];
  beforeAll(async () => {
    app = await startTestApp({ worker: false, env: { SIGNALBOX_MAX_HELD_REQUESTS: String(CAP), SIGNALBOX_MAX_CONNECTIONS_PER_ADDRESS: "2000" } });
    await declareType(app, "slow");
    waitId = (await openWait(app, "held-run", { signal: "slow" })).body.id;
  });
  afterAll(async () => {
    for (const r of held) r.destroy();
    await app.close();
  });

  /** What one held request keeps in this process's heap, in KiB (the clients are another process). */
  async function heldCostKiB(path: string, accept: string, n = CAP): Promise<number> {
    const before = heapKiB();
    const clients = spawn(process.execPath, ["-e", HOLDING_CLIENTS, app.baseUrl, path, String(n), API_KEY, accept], { stdio: "ignore" });
    try {
      await waitFor(`${n} requests held`, () => app.changes.held, { until: (held) => held === n });
      return (heapKiB() - before) / n;
    } finally {
      clients.kill("SIGKILL");
      await waitFor("no request held", () => app.changes.held, { until: (n) => n === 0 });
    }
  }

  it("cost the server under 32 KiB each, and past the cap answer 503 with Retry-After", async () => {
    // The hostile-clients issue asks for under 32 KiB. Measured here 26.4 (long-poll) and 19 to
    // 23 (event stream), from 31.9 and about 33 before hono's middleware layers were chained into two
    // (a suspended frame each, kept by every held request) and an event stream became one
    // ReadableStream instead of a TransformStream; a bare hono server holds a request for about 9.
    // A first few of each, so what is built once per process (compiled code, caches) is not counted.
    await heldCostKiB(`/waits/${waitId}?wait_s=60`, "application/json", 20);
    await heldCostKiB("/runs/held-run/events", "text/event-stream", 20);
    const longPollKiB = await heldCostKiB(`/waits/${waitId}?wait_s=60`, "application/json");
    const streamKiB = await heldCostKiB("/runs/held-run/events", "text/event-stream");
    expect(longPollKiB).toBeLessThan(32);
    expect(streamKiB).toBeLessThan(32);

    for (let i = 0; i < CAP; i++) held.push(holdOpen(app, `/waits/${waitId}?wait_s=60`));
    await waitFor("the cap of held requests reached", () => app.changes.held, { until: (n) => n === CAP });

    const refused = await rawRequest(app.baseUrl, { method: "GET", path: `/waits/${waitId}?wait_s=60`, headers: { authorization: `Bearer ${API_KEY}` } });
    expect(refused.status).toBe(503);
    expect(refused.headers["retry-after"]).toBe("1");
    const stream = await rawRequest(app.baseUrl, { method: "GET", path: "/runs/held-run/events", headers: { authorization: `Bearer ${API_KEY}`, accept: "text/event-stream" } });
    expect(stream.status).toBe(503);
    // A read that need not wait still answers.
    expect((await rawRequest(app.baseUrl, { method: "GET", path: `/waits/${waitId}`, headers: { authorization: `Bearer ${API_KEY}` } })).status).toBe(200);

    for (const r of held.splice(0, 10)) r.destroy(); // clients that give up free their places
    await waitFor("ten held requests ended", () => app.changes.held, { until: (n) => n === CAP - 10 });
    const again = holdOpen(app, `/waits/${waitId}?wait_s=60`);
    held.push(again);
    await waitFor("one more request held", () => app.changes.held, { until: (n) => n === CAP - 9 });
  }, 60_000);
});
