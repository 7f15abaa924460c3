import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hasChromium, launchChromium } from "../helpers/browser.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// /docs with no internet: every request to another host is refused, and the reference still
// renders from the installed package, with none of Scalar's hosted-service buttons.

let app: TestApp;
let browser: Browser | undefined;

beforeAll(async () => {
  app = await startTestApp({ worker: false });
  if (hasChromium) browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await app?.close();
});

describe("/docs", () => {
  it("loads Scalar's bundle from this server, not a CDN, and names no hosted service", async () => {
    const page = await (await fetch(`${app.baseUrl}/docs`)).text();
    const src = /<script src="([^"]+)"/.exec(page)?.[1];
    expect(src).toMatch(/^\/docs\/scalar-api-reference-\d+\.\d+\.\d+\.js$/);
    expect(page).not.toMatch(/https?:\/\//);
    expect(page).toContain('"hideClientButton": true');
    const bundle = await fetch(app.baseUrl + src!, { headers: { "accept-encoding": "gzip" } });
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get("content-type")).toMatch(/javascript/);
    expect(bundle.headers.get("cache-control")).toContain("immutable");
    expect((await bundle.text()).length).toBeGreaterThan(1_000_000);
  });

  it.skipIf(!hasChromium)("renders the operation list in a browser with every other host unreachable", async () => {
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      const refused: string[] = [];
      const ours = new URL(app.baseUrl).host;
      await page.route("**/*", (route) => {
        const url = new URL(route.request().url());
        if (url.host === ours || url.protocol === "data:" || url.protocol === "blob:") return route.continue();
        refused.push(url.href);
        return route.abort("internetdisconnected");
      });
      const warnings: string[] = [];
      page.on("console", (m) => void (m.type() === "error" || m.type() === "warning" ? warnings.push(m.text()) : undefined));
      await page.goto(`${app.baseUrl}/docs`);
      await page.getByRole("heading", { name: "Signal types", level: 2 }).waitFor({ timeout: 20_000 });
      await expect(page.getByText("Create or replace a signal type").first().isVisible()).resolves.toBe(true);
      await expect(page.getByText(/open in client|deploy|ask ai|generate mcp|developer tools/i).count()).resolves.toBe(0);
      // The open-a-wait example is the documented request, not every field of the schema at once.
      await page.goto(`${app.baseUrl}/docs#tag/waits/POST/runs/{run}/waits`);
      const example = page.locator("pre", { hasText: "scene-2/approval" }).first();
      await example.waitFor({ timeout: 20_000 });
      const sample = await example.innerText();
      expect(sample).toContain('"timeout_s": 172800');
      expect(sample).not.toMatch(/timeout_at|"timer"|"sensor"/);
      expect(refused).toEqual([]);
      expect(warnings).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);
});
