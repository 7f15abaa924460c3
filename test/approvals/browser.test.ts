import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHROMIUM, hasChromium, launchChromium } from "../helpers/browser.ts";
import { openWait } from "../helpers/http.ts";
import { settledWait } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// A person with a real browser: open the link, write a comment, press the button, read the
// result. Debian's chromium (`apt-get install chromium`; .ci/run installs it when missing).

if (!hasChromium) console.warn(`skipping the approval browser test: ${CHROMIUM} is missing (apt-get install chromium)`);

let app: TestApp;
let browser: Browser | undefined;
beforeAll(async () => {
  app = await startTestApp();
  const res = await app.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" }, responses: ["approve", "reject"] } });
  expect(res.status).toBe(201);
  if (hasChromium) browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await app?.close();
});

describe("an approval link in a browser", () => {
  it.skipIf(!hasChromium)("open, comment, press the button: the result page shows and the wait is received with the comment", async () => {
    const { body: wait } = await openWait(app, "browser-1", { signal: "approval" }, 201);
    const made = await app.api(`/waits/${wait.id}/links`, { method: "POST", json: { responder: "kim@example.com" } });
    const { links } = (await made.json()) as { links: Record<string, string> };

    const context = await browser!.newContext();
    const page = await context.newPage();
    const problems: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") problems.push(m.text()); // e.g. a CSP violation
    });
    page.on("pageerror", (e) => problems.push(e.message));
    try {
      const shown = await page.goto(links.approve!);
      expect(shown?.status()).toBe(200);
      await expect(page.title()).resolves.toMatch(/approve/);
      await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("Confirm your answer");
      // The page's own style applied (the CSP allows inline style, nothing else).
      // (Runs in the page: the DOM's getComputedStyle, which this project's TypeScript lib does not declare.)
      type Styles = { getComputedStyle(el: unknown): { backgroundColor: string } };
      const buttonColour = await page.getByRole("button").evaluate((b) => (globalThis as unknown as Styles).getComputedStyle(b).backgroundColor);
      expect(buttonColour).toBe("rgb(11, 87, 208)");

      expect((await (await app.api(`/waits/${wait.id}`)).json()) as { status: string }).toMatchObject({ status: "waiting" });
      await page.getByLabel("Comment (optional)").fill("Approved from a real browser: ok & <fine>");
      const [posted] = await Promise.all([page.waitForNavigation(), page.getByRole("button", { name: "Answer “approve”" }).click()]);
      expect(posted?.status()).toBe(200);
      await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toMatch(/your answer was recorded/);
      await expect(page.locator("blockquote").textContent()).resolves.toBe("Approved from a real browser: ok & <fine>");

      const done = await settledWait(app, wait.id);
      expect(done.status).toBe("received");
      expect(done.result.payload).toEqual({ response: "approve", responder: "kim@example.com", comment: "Approved from a real browser: ok & <fine>" });

      // Back and press again: the link worked once.
      await page.goto(links.approve!);
      await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("This link has already been used");
      expect(problems.filter((p) => !/status of 409/.test(p))).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);
});
