import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMetrics } from "../../src/core/metrics.ts";
import { databaseGauges, GAUGES_MAX_AGE_MS } from "../../src/operations/database-gauges.ts";
import { declareType, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

/** /metrics, /openapi.json and /docs answer anyone: none may cost a database read or a rebuild per request. */
describe("public operations endpoints", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
    await declareType(app, "approval");
  });
  afterAll(() => app.close());

  it("database gauges are counted at most once per interval, and concurrent scrapes share one count", async () => {
    const metrics = createMetrics();
    let clock = 0;
    const refresh = databaseGauges(app.deps, metrics, () => clock);
    const open = async () => (await metrics.waitsOpen.get()).values[0]?.value;

    await refresh();
    expect(await open()).toBe(0);
    await openWait(app, "run-gauges", { signal: "approval" });
    clock += GAUGES_MAX_AGE_MS - 1;
    await refresh();
    expect(await open()).toBe(0); // still the earlier count
    clock += 1;
    const [a, b] = [refresh(), refresh()];
    expect(a).toBe(b);
    await a;
    expect(await open()).toBe(1);
  });

  it("/openapi.json and /docs are built once: the same document every time", async () => {
    const [first, second] = [await fetch(`${app.baseUrl}/openapi.json`), await fetch(`${app.baseUrl}/openapi.json`)];
    const [one, two] = [await first.text(), await second.text()];
    expect(first.headers.get("content-type")).toMatch(/^application\/json/);
    expect(JSON.parse(one)).toMatchObject({ openapi: "3.1.0" });
    expect(two).toBe(one);
    const docs = await fetch(`${app.baseUrl}/docs`);
    expect(docs.status).toBe(200);
    expect(await docs.text()).toBe(await (await fetch(`${app.baseUrl}/docs`)).text());
  });
});
