import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Delivery isolation (issue 13, item 1) for an endpoint that answers, slowly, with hundreds of
// callbacks owed to it: its backlog must not hold every delivery job slot while it drains.
// With two slots and four batch jobs of 100 callbacks to an endpoint answering in 600 ms (16 at
// a time: about 27 a second), a healthy endpoint's callback queued behind them arrives while
// most of the slow endpoint's are still owed, not after them. No time is asserted: the order is.

const SLOW_WAITS = 400;
let app: TestApp;
/** Answers every callback 600 ms after it came. */
let slow: Awaited<ReturnType<typeof startCallbackReceiver>>;
const slowReceived = () => slow.received.map((cb) => cb.json.wait.id as string);

beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_DELIVERY_CONCURRENCY: "2", SIGNALBOX_DELIVERY_ENDPOINT_CONCURRENCY: "16" } });
  await declareType(app, "approval", { auth: { scheme: "none" } });
  slow = await startCallbackReceiver(() => new Promise((r) => setTimeout(() => r(204), 600)));
});
afterAll(async () => {
  await app?.close();
  await slow?.close();
});

describe("a slow endpoint with hundreds of callbacks owed", () => {
  it("holds no delivery slot for its backlog: a healthy endpoint's callback queued behind it arrives first, and every slow one arrives", { timeout: 120_000 }, async () => {
    const healthy = await startCallbackReceiver();
    try {
      const ids: string[] = [];
      for (let i = 0; i < SLOW_WAITS; i++) ids.push((await openWait(app, `slow-${i}`, { signal: "approval", timeout_s: 60, callback_url: slow.url }, 201)).body.id);
      await advanceClock(app, 60); // all time out together: four batch jobs of 100 callbacks
      await waitFor("the slow endpoint's first callbacks", () => slowReceived().length, { until: (n) => n > 0, timeoutMs: 20_000 });

      await openWait(app, "healthy", { signal: "approval", callback_url: healthy.url }, 201);
      expect((await intake(app, "healthy", "approval", "{}")).status).toBe(202);
      await healthy.waitFor(1, 60_000);
      const slowWhenHealthyArrived = slowReceived().length;
      expect(slowWhenHealthyArrived).toBeLessThan(SLOW_WAITS / 2);

      await waitFor("every slow callback", () => new Set(slowReceived()).size, { until: (n) => n === SLOW_WAITS, timeoutMs: 100_000 });
      expect(new Set(slowReceived())).toEqual(new Set(ids));
      console.log(`slow endpoint: ${slowWhenHealthyArrived} of ${SLOW_WAITS} callbacks had arrived when the healthy one did`);
    } finally {
      await healthy.close();
    }
  });
});
