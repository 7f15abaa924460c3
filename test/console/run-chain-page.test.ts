import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hasChromium, launchChromium } from "../helpers/browser.ts";
import { declareType, openWait, send } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { axeViolations, signInPage } from "./browser-pages.ts";
import { signInConsole, type ConsoleClient } from "./console-client.ts";

// The run page of a continue-as-new chain (POST /runs/{run}/continue): where the run's work
// went, where it came from, and the run.continued / run.continued_from events in its history.

let app: TestApp;
let client: ConsoleClient;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await declareType(app, "approval");
  await openWait(app, "chain-1", { signal: "approval" }, 201);
  for (const [from, to] of [["chain-1", "chain-2"], ["chain-2", "chain-3"]]) {
    const res = await send(app, "POST", `/runs/${from}/continue`, { run_id: to, by: "engine", reason: "history too long" });
    expect(res.status, await res.clone().text()).toBe(200);
  }
  client = await signInConsole(app);
});
afterAll(async () => {
  await app?.close();
});

describe("the run page of a continued run", () => {
  it("says continued, links the next run and the newest one, offers no control, and lists run.continued", async () => {
    const page = await (await client.get("/console/runs/chain-1")).text();
    expect(page).toContain('<strong class="state state-continued">continued</strong>');
    expect(page).toMatch(/<dt>Continued as<\/dt><dd><a href="\/console\/runs\/chain-2">chain-2<\/a>/);
    expect(page).toMatch(/<dt>Newest run<\/dt><dd><a href="\/console\/runs\/chain-3">chain-3<\/a>/);
    expect(page).not.toContain("<dt>Continued from</dt>");
    expect(page).not.toContain("Cancel run");
    expect(page).toContain('<span class="etype">run.continued</span>');
    expect(page).toContain('<span class="etype">signal.cancelled</span>');
  });

  it("on the runs after it: continued from, and run.continued_from in the history", async () => {
    const middle = await (await client.get("/console/runs/chain-2")).text();
    expect(middle).toMatch(/<dt>Continued from<\/dt><dd><a href="\/console\/runs\/chain-1">chain-1<\/a>/);
    expect(middle).toMatch(/<dt>Continued as<\/dt><dd><a href="\/console\/runs\/chain-3">chain-3<\/a>/);
    expect(middle).not.toContain("<dt>Newest run</dt>"); // the next run is the newest: said once
    const newest = await (await client.get("/console/runs/chain-3")).text();
    expect(newest).toContain('<strong class="state state-active">active</strong>');
    expect(newest).toMatch(/<dt>Continued from<\/dt><dd><a href="\/console\/runs\/chain-2">chain-2<\/a>/);
    expect(newest).toContain('<span class="etype">run.continued_from</span>');
    expect(newest).toContain("Cancel run");
  });

  it.skipIf(!hasChromium)("axe-core finds no serious or critical violation on it", async () => {
    const browser = await launchChromium();
    try {
      const page = await (await browser.newContext({ bypassCSP: true })).newPage();
      await signInPage(page, app.baseUrl, "/console/runs/chain-2");
      expect(await axeViolations(page)).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
