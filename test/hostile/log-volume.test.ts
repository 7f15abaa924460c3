import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { logBudget } from "../../src/core/logger.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { logCapture } from "../helpers/probes.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

describe("log budget", () => {
  it("lets perS lines a second through and says once how many it held back", () => {
    let now = 0;
    const held: number[] = [];
    const mayLog = logBudget(3, () => now);
    const allowed = Array.from({ length: 10 }, () => mayLog((n) => held.push(n)));
    expect(allowed).toEqual([true, true, true, false, false, false, false, false, false, false]);
    now = 1_000;
    expect(mayLog((n) => held.push(n))).toBe(true);
    expect(held).toEqual([7]);
  });
});

describe("a flood of requests", () => {
  const { stream, lines } = logCapture<{ msg: string; held?: number }>();
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ env: { LOG_LEVEL: "info", SIGNALBOX_LOG_REQUESTS_PER_S: "10" }, logStream: stream });
  });
  afterAll(() => app.close());

  it("logs a bounded number of request lines, and counts the rest", async () => {
    const started = Date.now();
    for (let i = 0; i < 10; i++) await Promise.all(Array.from({ length: 30 }, () => fetch(`${app.baseUrl}/no-such-route-${i}`)));
    const seconds = Math.ceil((Date.now() - started) / 1000) + 1;
    const requestLines = () => lines.filter((l) => l.msg === "request").length;
    expect(requestLines()).toBeLessThanOrEqual(10 * seconds);
    await new Promise((r) => setTimeout(r, 1_000 - (Date.now() % 1_000) + 10)); // into the next second
    await fetch(`${app.baseUrl}/healthz`);
    const held = await waitFor("the held-back line", () => lines.filter((l) => l.msg.startsWith("request lines held back")), { until: (h) => h.length > 0 });
    expect(requestLines() + held.reduce((n, l) => n + (l.held ?? 0), 0)).toBe(301);
  });
});
