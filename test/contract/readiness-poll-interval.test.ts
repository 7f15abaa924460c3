import { afterAll, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// An idle runner looks for jobs once per SIGNALBOX_POLL_INTERVAL_MS: with an interval above the
// 5 s a runner may stay silent, a healthy idle process must not read as "not polling".
let app: TestApp;
afterAll(() => app?.close());

it("an idle, healthy worker looking for jobs every 10 s stays ready", async () => {
  app = await startTestApp({ env: { SIGNALBOX_POLL_INTERVAL_MS: "10000", SIGNALBOX_WORKER_STALE_S: "60" } });
  const statuses: number[] = [];
  const until = Date.now() + 16_000;
  while (Date.now() < until) {
    statuses.push((await fetch(`${app.baseUrl}/readyz`)).status);
    await new Promise((r) => setTimeout(r, 250));
  }
  expect(statuses.filter((s) => s !== 200), `worker ${JSON.stringify(app.worker!.status())}`).toEqual([]);
}, 60_000);
