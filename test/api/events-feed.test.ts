import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// The change feed's held requests and the public operations endpoints, at their edges.

const auth = { authorization: `Bearer ${API_KEY}` };
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false, env: { SIGNALBOX_SSE_HEARTBEAT_S: "0.2" } });
  await app.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } });
});
afterAll(async () => {
  await app?.close();
});

describe("held requests", () => {
  // hono answers a HEAD by running the GET and dropping its body: a stream opened for it was
  // never read nor cancelled, so its place (ChangeFeed.admit) was never given back, and past
  // SIGNALBOX_MAX_HELD_REQUESTS HEADs every long-poll and stream was a 503.
  it("a HEAD of the event stream takes no place among the held requests for good", async () => {
    await waitFor("no request held", () => app.changes.held, { until: (n) => n === 0 });
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${app.baseUrl}/runs/head-run/events`, { method: "HEAD", headers: { ...auth, accept: "text/event-stream" } });
      expect(res.status).toBe(200);
    }
    // Nothing is held open once the HEADs are answered: each place taken must be given back.
    await waitFor("the HEADs' places to be given back", () => app.changes.held, { until: (n) => n === 0, timeoutMs: 2000 });
  });
});

describe("/metrics", () => {
  it("answers within 2 s when the database does not answer its gauges' count", async () => {
    const other = await startTestApp({ databaseUrl: app.databaseUrl, worker: false });
    const locker = postgres(app.databaseUrl, { max: 1, onnotice: () => {} });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    // A transaction holding the waits table: the count behind signalbox_waits_open waits on it,
    // as it would on a database gone silent.
    let locked = false;
    const holding = locker.begin(async (tx) => {
      await tx`lock table signalbox.waits in access exclusive mode`;
      locked = true;
      await released;
    });
    try {
      await waitFor("the lock to be taken", () => locked);
      const started = performance.now();
      const res = await Promise.race([fetch(`${other.baseUrl}/metrics`), new Promise<undefined>((r) => setTimeout(() => r(undefined), 5_000))]);
      expect(res, "no answer within 5 s").toBeDefined();
      expect(res!.status).toBe(200);
      expect(await res!.text()).toContain("signalbox_http_request_duration_seconds");
      expect(performance.now() - started).toBeLessThan(2_000);
    } finally {
      release();
      await holding.catch(() => {});
      await locker.end();
      await other.close().catch(() => {});
    }
  });
});
