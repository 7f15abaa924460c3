import path from "node:path";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHROMIUM, hasChromium, launchChromium } from "../helpers/browser.ts";
import { openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { axeViolations, openPage, shotName, signInPage } from "./browser-pages.ts";

// An operator with a real browser: sign in, find a wait by its metadata, watch a run's history
// grow live, pause and resume it, answer approvals; axe-core on every page; a phone-sized
// screen; and not one request to another host. Debian's chromium, as test/approvals/browser.test.ts.
// CONSOLE_SCREENSHOTS=docs/console writes a screenshot of each page there (for the README).

if (!hasChromium) console.warn(`skipping the console browser tests: ${CHROMIUM} is missing (apt-get install chromium)`);
const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS;
const STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

let app: TestApp;
let browser: Browser | undefined;
const ids: Record<string, string> = {};

beforeAll(async () => {
  app = await startTestApp();
  const put = async (name: string, body: unknown) => expect((await app.api(`/signal-types/${name}`, { method: "PUT", json: body })).status).toBe(201);
  await put("approval", { description: "Manager approves the order", auth: { scheme: "none" }, responses: ["approve", "reject"] });
  await put("payment", {
    description: "The payment provider confirms",
    schema: { type: "object", required: ["paid"], properties: { paid: { type: "boolean" } } },
    auth: { scheme: "standard-webhooks", secrets: [STANDARD_SECRET] },
    buffer_ttl_s: 600,
  });
  const open = async (run: string, spec: Record<string, unknown>) => (await openWait(app, run, spec, 201)).body.id as string;
  ids.kim = await open("order-17", { signal: "approval", timeout_s: 7200, metadata: { assignee: "kim", order_id: "o-17" } });
  ids.lee = await open("order-18", { signal: "approval", timeout_s: 7200, metadata: { assignee: "lee", order_id: "o-18" } });
  ids.quorum = await open("order-19", { signal: "approval", quorum: { count: 2 }, metadata: { assignee: "board" } });
  ids.payment = await open("order-17", { signal: "payment", metadata: { order_id: "o-17" } });
  if (hasChromium) browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await app?.close();
});

const signIn = (page: Page, next = "/console/waits") => signInPage(page, app.baseUrl, next);

const api = async <T>(p: string) => (await (await app.api(p)).json()) as T;

describe.skipIf(!hasChromium)("the console in a browser", () => {
  let context: BrowserContext;
  let recorded: Awaited<ReturnType<typeof openPage>>;
  beforeAll(async () => {
    context = await browser!.newContext();
    recorded = await openPage(context);
  });
  afterAll(async () => {
    await context?.close();
  });

  it("signs in and finds a pending wait by its metadata, the filter in the URL", async () => {
    const { page } = recorded;
    await signIn(page);
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("Pending waits");
    await expect(page.locator("tbody tr").count()).resolves.toBe(4);

    await page.getByLabel("Metadata key=value").fill("assignee=kim");
    await Promise.all([page.waitForURL((u) => u.searchParams.get("meta") === "assignee=kim"), page.getByRole("button", { name: "Filter" }).click()]);
    const rows = page.locator("tbody tr");
    await expect(rows.count()).resolves.toBe(1);
    await expect(rows.first().textContent()).resolves.toMatch(/order-17[\s\S]*approval[\s\S]*in (1 h 59 min|2 h)/);
    // The URL alone reproduces the page (linkable filters).
    await page.reload();
    await expect(page.locator("tbody tr").count()).resolves.toBe(1);
    await expect(page.getByLabel("Metadata key=value").first().inputValue()).resolves.toBe("assignee=kim");
  });

  it("a run's history grows live, and pause and resume are buttons", async () => {
    const { page } = recorded;
    await Promise.all([page.waitForURL((u) => u.pathname === "/console/runs/order-17"), page.getByRole("link", { name: "order-17" }).click()]);
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("Run order-17");
    const history = page.locator("#timeline li");
    const before = await history.count();
    expect(before).toBe(2); // the two waits opened
    await page.locator("#live-status", { hasText: "Live" }).waitFor();

    // A wait opened by the engine shows up without a reload.
    const opened = await app.api("/runs/order-17/waits", { method: "POST", json: { signal: "nap", timer: { delay_s: 3600 } } });
    expect(opened.status).toBe(201);
    await history.nth(before).waitFor();
    await expect(history.nth(before).textContent()).resolves.toContain("signal.waiting");

    await page.getByLabel("Reason").first().fill("vendor outage");
    await Promise.all([page.waitForURL((u) => u.searchParams.get("done") === "paused"), page.getByRole("button", { name: "Pause" }).click()]);
    await expect(page.getByRole("status").first().textContent()).resolves.toBe("The run is paused.");
    await expect(page.locator(".state").textContent()).resolves.toBe("paused");
    expect((await api<{ control: Record<string, unknown> }>("/runs/order-17")).control).toMatchObject({ is_paused: true, pause_reason: "vendor outage", paused_by: "Kim Operator" });

    await Promise.all([page.waitForURL((u) => u.searchParams.get("done") === "resumed"), page.getByRole("button", { name: "Resume" }).click()]);
    await expect(page.locator(".state").textContent()).resolves.toBe("active");
    expect((await api<{ control: Record<string, unknown> }>("/runs/order-17")).control).toMatchObject({ is_paused: false });
    await expect(page.locator("#timeline li .etype").allTextContents()).resolves.toEqual(expect.arrayContaining(["run.pausing", "run.resumed"]));
  });

  it("answers an approval as the signed-in operator, and a quorum wait shows the votes", async () => {
    const { page } = recorded;
    await page.getByRole("link", { name: "Approvals" }).click();
    await page.waitForURL((u) => u.pathname === "/console/approvals");
    const card = page.locator("article", { hasText: "order-17" });
    await expect(card.textContent()).resolves.toContain("Manager approves the order");
    await card.getByLabel("Comment (optional)").fill("Looks right & <fine>");
    await Promise.all([page.waitForURL((u) => u.searchParams.has("answered")), card.getByRole("button", { name: "approve" }).click()]);
    await expect(page.getByRole("status").first().textContent()).resolves.toContain("Your answer was recorded");
    const wait = await api<{ status: string; result: { payload: unknown } }>(`/waits/${ids.kim}`);
    expect(wait.status).toBe("received");
    expect(wait.result.payload).toEqual({ response: "approve", responder: "Kim Operator", comment: "Looks right & <fine>" });
    await expect(page.locator("article", { hasText: "order-17" }).count()).resolves.toBe(0);

    const board = page.locator("article", { hasText: "order-19" });
    await expect(board.textContent()).resolves.toContain("none yet");
    await Promise.all([page.waitForURL((u) => u.searchParams.get("answered") === "vote"), board.getByRole("button", { name: "approve" }).click()]);
    await expect(page.locator("article", { hasText: "order-19" }).textContent()).resolves.toContain("approve: Kim Operator");
    expect(await api<{ status: string; votes: unknown }>(`/waits/${ids.quorum}`)).toMatchObject({ status: "waiting", votes: { approve: ["Kim Operator"] } });
  });

  it("shows a signal type with a copyable curl example and no secret", async () => {
    const { page } = recorded;
    await page.getByRole("link", { name: "Signal types" }).click();
    await Promise.all([page.waitForURL((u) => u.pathname === "/console/signal-types/payment"), page.getByRole("link", { name: "payment" }).click()]);
    const example = await page.locator("pre[data-copy]").textContent();
    expect(example).toContain("webhook-signature: v1,$SIG");
    expect(example).toContain(`${app.baseUrl}/signals/RUN_ID/payment`);
    await expect(page.getByRole("button", { name: "Copy" }).count()).resolves.toBe(1);
    expect(await page.content()).not.toContain(STANDARD_SECRET.slice(6));
  });

  it("made no request to another host and broke no Content-Security-Policy rule", () => {
    const foreign = recorded.requests.filter((u) => !u.startsWith(app.baseUrl + "/"));
    expect(foreign).toEqual([]);
    expect(recorded.requests.length).toBeGreaterThan(10);
    expect(recorded.problems).toEqual([]);
  });
});

const PAGES = ["/console/waits", "/console/runs/order-17", "/console/approvals", "/console/signal-types", "/console/signal-types/payment", "/console/waits?kind=robot"];

describe.skipIf(!hasChromium)("accessibility and small screens", () => {
  it("axe-core finds no serious or critical violation on any page", async () => {
    // axe is injected as a script tag: this context alone lets it past the CSP.
    const context = await browser!.newContext({ bypassCSP: true });
    try {
      const page = await context.newPage();
      await page.goto(`${app.baseUrl}/console/sign-in`);
      const found: Record<string, unknown[]> = { "/console/sign-in": await axeViolations(page) };
      await signIn(page);
      for (const p of PAGES) {
        await page.goto(app.baseUrl + p);
        found[p] = await axeViolations(page);
      }
      expect(found).toEqual(Object.fromEntries(Object.keys(found).map((k) => [k, []])));
    } finally {
      await context.close();
    }
  }, 60_000);

  it("at 375 px wide every page fits the screen (wide tables scroll inside their frame)", async () => {
    const context = await browser!.newContext({ viewport: { width: 375, height: 800 }, isMobile: true, hasTouch: true });
    try {
      const { page, problems } = await openPage(context);
      await signIn(page);
      const overflowing: Record<string, number> = {};
      for (const p of ["/console/sign-in", ...PAGES]) {
        await page.goto(app.baseUrl + p);
        const width = await page.evaluate(() => (globalThis as unknown as { document: { documentElement: { scrollWidth: number } } }).document.documentElement.scrollWidth);
        if (width > 375) overflowing[p] = width;
        if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, `mobile-${shotName(p)}.png`), fullPage: true });
      }
      expect(overflowing).toEqual({});
      // The last page is the answer to a bad filter: its 400 is the point.
      expect(problems).toEqual(["Failed to load resource: the server responded with a status of 400 (Bad Request)"]);
    } finally {
      await context.close();
    }
  }, 60_000);

  it.skipIf(!SCREENSHOTS)("screenshots of each page for the README", async () => {
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const page = await context.newPage();
      await page.goto(`${app.baseUrl}/console/sign-in`);
      await page.screenshot({ path: path.join(SCREENSHOTS!, "sign-in.png") });
      await signIn(page);
      for (const p of PAGES.slice(0, -1)) {
        await page.goto(app.baseUrl + p);
        await page.screenshot({ path: path.join(SCREENSHOTS!, `${shotName(p)}.png`), fullPage: true });
      }
    } finally {
      await context.close();
    }
  }, 60_000);
});
