import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hasChromium, launchChromium } from "../helpers/browser.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";
import path from "node:path";
import { axeViolations, openPage, overflowPx, shotName, signInPage } from "./browser-pages.ts";
import { signInConsole, type ConsoleClient } from "./console-client.ts";

// The operator's pages for what went wrong: failing deliveries (redeliver one, or all matching a
// filter), the signal log with its dead letters, and the overview. A real engine stand-in answers
// 500 until told otherwise; SIGNALBOX_DELIVERY_MAX_ATTEMPTS=2 makes a delivery fail fast.
// CONSOLE_SCREENSHOTS=docs/console writes a screenshot of each of these pages there (for the README).

const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS;

let app: TestApp;
let browser: Browser | undefined;
let client: ConsoleClient;
let engineAnswer = 500;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
let otherEngine: Awaited<ReturnType<typeof startCallbackReceiver>>;
let firstId: string;
let otherId: string;

type WaitBody = { status: string; delivery: { status: string; attempts: number } };
const getWait = async (id: string) => (await (await app.api(`/waits/${id}`)).json()) as WaitBody;
const hostOf = (url: string) => new URL(url).host;

/** Opens a wait with a callback and resolves it; resolves once its delivery has failed. */
async function failedDelivery(run: string, callbackUrl: string): Promise<string> {
  const { body: wait } = await openWait(app, run, { signal: "approval", callback_url: callbackUrl, metadata: { order_id: run } }, 201);
  expect((await intake(app, run, "approval", JSON.stringify({ response: "approve" }))).status).toBe(202);
  await waitFor(`${run}'s delivery to fail`, () => getWait(wait.id), { until: (w) => w.delivery.status === "failed", timeoutMs: 20_000 });
  return wait.id as string;
}

beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_DELIVERY_MAX_ATTEMPTS: "2" } });
  engine = await startCallbackReceiver(() => engineAnswer);
  otherEngine = await startCallbackReceiver(() => 503);
  await declareType(app, "approval", { description: "Manager approves", auth: { scheme: "none" }, responses: ["approve", "reject"] });
  await declareType(app, "payment", { auth: { scheme: "none" }, schema: { type: "object", required: ["paid"], properties: { paid: { type: "boolean" } } } });
  // Dead letters: a signal nobody waits for, and a payload that breaks its schema.
  expect((await intake(app, "order-9", "approval", JSON.stringify({ response: "approve", note: "<script>alert(1)</script>" }))).status).toBe(409);
  await openWait(app, "order-9", { signal: "payment" }, 201);
  expect((await intake(app, "order-9", "payment", JSON.stringify({ paid: "yes" }))).status).toBe(422);
  [firstId, otherId] = await Promise.all([failedDelivery("order-1", engine.url), failedDelivery("order-2", otherEngine.url)]);
  client = await signInConsole(app);
  if (hasChromium) browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await engine?.close();
  await otherEngine?.close();
  await app?.close();
});

describe("the overview over HTTP", () => {
  beforeAll(async () => {
    await openWait(app, "order-10", { signal: "approval", timeout_s: 1800 }, 201); // due within the hour
    const { body: late } = await openWait(app, "order-11", { signal: "approval", timeout_at: new Date(Date.now() - 1000).toISOString() }, 201);
    await waitFor("the past deadline to time out", async () => (await (await app.api(`/waits/${late.id}`)).json()) as { status: string }, { until: (w) => w.status === "timed_out" });
    const { body: dropped } = await openWait(app, "order-12", { signal: "approval" }, 201);
    expect((await app.api(`/waits/${dropped.id}/cancel`, { method: "POST" })).status).toBe(200);
  });

  it("counts open waits by signal, what is due, what resolved in 24 h, failing deliveries and dead letters", async () => {
    const res = await client.get("/console/overview");
    expect(res.status).toBe(200);
    const page = await res.text();
    const tiles = Object.fromEntries([...page.matchAll(/<dt>([^<]+)<\/dt><dd>(?:<a [^>]+>)?([\d,]+)/g)].map((m) => [m[1], Number(m[2]!.replace(/,/g, ""))]));
    expect(tiles).toEqual({
      "Open waits": 2,
      "Due within the hour": 1,
      "Received, last 24 h": 2,
      "Timed out, last 24 h": 1,
      "Cancelled, last 24 h": 1,
      "Failed deliveries": 2,
      "Pending deliveries (retrying)": 0,
      "Dead letters, last 24 h": 2,
    });
    expect(page).toContain('<a href="/console/waits?signal=approval">approval</a></td><td>1</td>');
    expect(page).toContain('<a href="/console/waits?signal=payment">payment</a></td><td>1</td>');
    // The charts are SVG drawn on the server: the last bucket of each holds what just happened.
    expect(page).toMatch(/aria-label="Last hour, per 5 minutes: 2 received, 1 timed out, 1 cancelled, 2 dead letters"/);
    expect(page).toMatch(/<title>[^<]*: 2 received, 1 timed out, 1 cancelled, 2 dead letters<\/title><rect class="s-received"/);
    expect(page).not.toMatch(/<script(?! src="\/console\/assets\/)/);
  });

  it("is the console's home", async () => {
    const res = await client.get("/console/");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/overview");
  });
});

describe("the deliveries page over HTTP", () => {
  it("lists failing deliveries with each attempt, and filters by status and callback host in the URL", async () => {
    const all = await (await client.get("/console/deliveries")).text();
    expect(all).toContain("order-1");
    expect(all).toContain("order-2");
    expect(all).toMatch(/<td>1<\/td><td><time[^>]*>[^<]*<\/time><\/td><td>500<\/td><td>HTTP 500<\/td><td>\d+ ms<\/td><td>retry<\/td>/);
    expect(all).toMatch(/<td>2<\/td>.*<td>500<\/td>.*<td>failed<\/td>/);

    const oneHost = await (await client.get(`/console/deliveries?host=${encodeURIComponent(hostOf(otherEngine.url))}`)).text();
    expect(oneHost).toContain("order-2");
    expect(oneHost).not.toContain("order-1");
    const pending = await (await client.get("/console/deliveries?status=pending")).text();
    expect(pending).toContain("No delivery is failing that matches");

    const bad = await client.get("/console/deliveries?status=lost&host=a%20b");
    expect(bad.status).toBe(400);
    const text = await bad.text();
    expect(text).toContain("Status: failed or pending.");
    expect(text).toContain("Callback host: a host or host:port");
  });

  it("redeliver forms need the session's CSRF token: without it nothing is sent", async () => {
    const forged = await client.post(`/console/deliveries/${otherId}/redeliver`, { _csrf: "forged" });
    expect(forged.status).toBe(403);
    const forgedAll = await client.post("/console/deliveries/redeliver", { _csrf: "" });
    expect(forgedAll.status).toBe(403);
    expect((await getWait(otherId)).delivery).toMatchObject({ status: "failed", attempts: 2 });
  });

  it("'redeliver all' sends again only what matches the filter (the same verb as POST /waits/{id}/redeliver)", async () => {
    const before = otherEngine.received.length;
    const res = await client.post("/console/deliveries/redeliver", { status: "failed", host: hostOf(otherEngine.url) });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe(`/console/deliveries?status=failed&host=${encodeURIComponent(hostOf(otherEngine.url))}&redelivered=1`);
    await otherEngine.waitFor(before + 2); // a fresh round of two attempts, both answered 503
    await waitFor("the redelivery to fail again", () => getWait(otherId), { until: (w) => w.delivery.status === "failed" && w.delivery.attempts === 4 });
    // The other engine's delivery was not touched.
    expect((await getWait(firstId)).delivery).toMatchObject({ status: "failed", attempts: 2 });
    const shown = await (await client.get(res.headers.get("location")!)).text();
    expect(shown).toContain("1 delivery was queued again.");
  });
});

/** The outcome of each row of a signal log page, top to bottom. */
const outcomesIn = (page: string) => [...page.matchAll(/<span class="outcome[^"]*">([a-z_]+)<\/span>/g)].map((m) => m[1]);

describe("the signal log over HTTP", () => {
  it("dead letters: every rejection, with its payload formatted and escaped, validation errors, and a link to its run", async () => {
    const res = await client.get("/console/signals?outcome=rejected");
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(outcomesIn(page)).toEqual(["rejected_invalid_payload", "rejected_not_waiting"]);
    expect(page).toContain('<a href="/console/runs/order-9">order-9</a>');
    expect(page).toContain("<code>/paid</code> must be boolean");
    expect(page).toContain(`\n  &quot;note&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;`); // indented JSON, escaped
    expect(page).not.toContain("<script>alert");
  });

  it("filters by outcome, signal and run in the URL", async () => {
    const received = await (await client.get("/console/signals?outcome=received&signal=approval")).text();
    expect(received).toContain("order-1");
    expect(received).toContain("order-2");
    expect(received).not.toContain("order-9");
    const oneRun = await (await client.get("/console/signals?run=order-9&signal=payment")).text();
    expect(outcomesIn(oneRun)).toEqual(["rejected_invalid_payload"]);
    const bad = await client.get("/console/signals?outcome=lost&run=a%20b");
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("Run: 1 to 200 characters");
  });

  it("pages with a cursor, newest first, the filters kept in the next link", async () => {
    for (let i = 0; i < 52; i++) expect((await intake(app, "flood", "approval", JSON.stringify({ response: "approve", n: i }))).status).toBe(409);
    const first = await (await client.get("/console/signals?run=flood&outcome=rejected")).text();
    expect(outcomesIn(first)).toHaveLength(50);
    expect(first.indexOf("&quot;n&quot;: 51")).toBeLessThan(first.indexOf("&quot;n&quot;: 50")); // newest first
    const next = /<a href="([^"]+)" rel="next">/.exec(first)![1]!.replaceAll("&amp;", "&");
    expect(new URL(next, app.baseUrl).searchParams.get("run")).toBe("flood");
    expect(new URL(next, app.baseUrl).searchParams.get("outcome")).toBe("rejected");
    const second = await (await client.get(next)).text();
    expect(outcomesIn(second)).toHaveLength(2);
    expect(second).toContain("&quot;n&quot;: 0");
    expect(second).not.toContain('rel="next"');
  });
});

describe("redrive from the signal log over HTTP", () => {
  it("a dead letter's Redrive button sends it again (the verb of POST /signals/redrive), once, and only with the session's CSRF token", async () => {
    const dead = await intake(app, "order-20", "approval", JSON.stringify({ response: "approve" }));
    expect(dead.status).toBe(409);
    const id = dead.body!.signal_id as string;
    const { body: wait } = await openWait(app, "order-20", { signal: "approval" }, 201);
    const action = `/console/signals/${id}/redrive`;
    expect(await (await client.get("/console/signals?run=order-20")).text()).toContain(`action="${action}"`);

    expect((await client.post(action, { _csrf: "forged", run: "order-20" })).status).toBe(403);
    expect(((await (await app.api("/runs/order-20/signals")).json()) as { items: Array<{ redriven_as: string | null }> }).items[0]!.redriven_as).toBeNull();

    const res = await client.post(action, { run: "order-20" });
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get("location")!, app.baseUrl);
    expect(Object.fromEntries(location.searchParams)).toEqual({ run: "order-20", redriven: "received", as: expect.stringMatching(/^sg_/) });
    const after = await (await client.get(location.pathname + location.search)).text();
    expect(after).toContain(`Sent again: received (${location.searchParams.get("as")})`);
    expect(after).toContain(`redriven as <span class="mono">${location.searchParams.get("as")}</span>`);
    expect(after).not.toContain(`action="${action}"`);
    expect(await getWait(wait.id)).toMatchObject({ status: "received" });

    const again = await client.post(action, { run: "order-20" });
    expect(again.status).toBe(409);
    expect(await again.text()).toContain("was already redriven");
  });
});

describe.skipIf(!hasChromium)("these pages in a browser", () => {
  let context: BrowserContext;
  let page: Page;
  let recorded: Awaited<ReturnType<typeof openPage>>;
  beforeAll(async () => {
    context = await browser!.newContext();
    recorded = await openPage(context);
    page = recorded.page;
    await signInPage(page, app.baseUrl, "/console/deliveries");
  });
  afterAll(async () => {
    await context?.close();
  });

  it("a failed callback is redelivered from the page and then arrives", async () => {
    await page.getByLabel("Callback host").fill(hostOf(engine.url));
    await Promise.all([page.waitForURL((u) => u.searchParams.get("host") === hostOf(engine.url)), page.getByRole("button", { name: "Filter", exact: true }).click()]);
    const card = page.locator("article", { hasText: "order-1" });
    await expect(page.locator("article").count()).resolves.toBe(1);
    await card.locator("summary", { hasText: "Each attempt" }).click();
    await expect(card.locator("tbody tr").count()).resolves.toBe(2);

    engineAnswer = 200; // the engine is back
    const before = engine.received.length;
    await Promise.all([page.waitForURL((u) => u.searchParams.get("redelivered") === "1"), card.getByRole("button", { name: "Redeliver approval for run order-1" }).click()]);
    await expect(page.getByRole("status").first().textContent()).resolves.toBe("1 delivery was queued again.");
    expect(new URL(page.url()).searchParams.get("host")).toBe(hostOf(engine.url)); // the filter stays
    const arrived = await engine.waitFor(before + 1);
    expect(arrived.at(-1)!.json).toMatchObject({ type: "signal.received", wait: { id: firstId } });
    await waitFor("the callback to be delivered", () => getWait(firstId), { until: (w) => w.delivery.status === "delivered" });
    await page.reload();
    await expect(page.locator("article").count()).resolves.toBe(0);
  });

  it("the overview draws its charts without breaking the CSP, and its tiles lead to the pages behind them", async () => {
    await page.getByRole("link", { name: "Overview" }).click();
    await page.waitForURL((u) => u.pathname === "/console/overview");
    await expect(page.locator("figure.chart svg rect").count()).resolves.toBeGreaterThan(0);
    await Promise.all([page.waitForURL((u) => u.pathname === "/console/deliveries" && u.searchParams.get("status") === "failed"), page.locator(".tile", { hasText: "Failed deliveries" }).getByRole("link").click()]);
  });

  it("the signal log shows the dead letters, a payload opens formatted, and a signal links to its run", async () => {
    await page.getByRole("link", { name: "Signal log" }).click();
    await page.waitForURL((u) => u.pathname === "/console/signals");
    await page.getByLabel("Outcome").selectOption("rejected");
    await page.getByLabel("Run").fill("order-9");
    await Promise.all([page.waitForURL((u) => u.searchParams.get("outcome") === "rejected"), page.getByRole("button", { name: "Filter", exact: true }).click()]);
    const rows = page.locator("tbody tr");
    await expect(rows.count()).resolves.toBe(2);
    const invalid = rows.filter({ hasText: "rejected_invalid_payload" });
    await expect(invalid.textContent()).resolves.toContain("/paid must be boolean");
    await invalid.locator("summary").click();
    await expect(invalid.locator("pre.json").textContent()).resolves.toBe('{\n  "paid": "yes"\n}');
    await Promise.all([page.waitForURL((u) => u.pathname === "/console/runs/order-9"), invalid.getByRole("link", { name: "order-9" }).click()]);
  });

  it("made no request to another host and broke no Content-Security-Policy rule", () => {
    expect(recorded.requests.filter((u) => !u.startsWith(app.baseUrl + "/"))).toEqual([]);
    expect(recorded.problems).toEqual([]);
  });
});

const PAGES = ["/console/overview", "/console/deliveries", "/console/deliveries?status=failed", "/console/signals", "/console/signals?outcome=rejected"];

describe.skipIf(!hasChromium)("accessibility and small screens on these pages", () => {
  it("axe-core finds no serious or critical violation, and each page fits 375 px", async () => {
    const context = await browser!.newContext({ bypassCSP: true, viewport: { width: 375, height: 800 }, isMobile: true });
    try {
      const page = await context.newPage();
      await signInPage(page, app.baseUrl, PAGES[0]);
      const found: Record<string, unknown[]> = {};
      const overflowing: Record<string, number> = {};
      for (const p of PAGES) {
        await page.goto(app.baseUrl + p);
        found[p] = await axeViolations(page);
        const over = await overflowPx(page, 375);
        if (over) overflowing[p] = over;
      }
      expect(found).toEqual(Object.fromEntries(PAGES.map((k) => [k, []])));
      expect(overflowing).toEqual({});
    } finally {
      await context.close();
    }
  }, 60_000);

  it.skipIf(!SCREENSHOTS)("screenshots of these pages for the README", async () => {
    for (const [width, prefix] of [[1280, ""], [375, "mobile-"]] as const) {
      const context = await browser!.newContext({ viewport: { width, height: 800 } });
      try {
        const page = await context.newPage();
        await signInPage(page, app.baseUrl, "/console/overview");
        for (const p of ["/console/overview", "/console/deliveries", "/console/signals?outcome=rejected"]) {
          await page.goto(app.baseUrl + p);
          if (p !== "/console/overview") await page.locator("details").first().evaluate((d) => d.setAttribute("open", ""));
          await page.screenshot({ path: path.join(SCREENSHOTS!, `${prefix}${shotName(p)}.png`), fullPage: prefix === "" && !p.startsWith("/console/signals") });
        }
      } finally {
        await context.close();
      }
    }
  }, 60_000);
});
