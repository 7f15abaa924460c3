import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { declareType, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { signInConsole, type ConsoleClient } from "./console-client.ts";

// The pending-waits page's filters, each in the URL: signal, run, metadata key=value (several
// at once), deadline before/after, kind; keyset paging; and what each row says about when the
// wait ends (a timer fires; it does not wait "never").

let app: TestApp;
let client: ConsoleClient;
const HOUR = 3600_000;

beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await declareType(app, "approval", { auth: { scheme: "none" }, responses: ["approve", "reject"] });
  await declareType(app, "bulk");
  await openWait(app, "r-soon", { signal: "approval", timeout_s: 1800, metadata: { team: "ops", region: "eu" } }, 201);
  await openWait(app, "r-later", { signal: "approval", timeout_s: 5 * 3600, metadata: { team: "ops", region: "us" } }, 201);
  await openWait(app, "r-open", { signal: "approval", metadata: { team: "dev" } }, 201);
  await openWait(app, "r-nap", { signal: "nap", timer: { delay_s: 7200 } }, 201);
  for (let i = 0; i < 53; i++) await openWait(app, `bulk-${String(i).padStart(2, "0")}`, { signal: "bulk" }, 201);
  client = await signInConsole(app);
}, 60_000);
afterAll(async () => {
  await app?.close();
});

/** The run of each row, top to bottom. */
const runsIn = (page: string) => [...page.matchAll(/<td><a href="\/console\/runs\/[^"]+">([^<]+)<\/a>/g)].map((m) => m[1]);
const show = async (query: string) => {
  const res = await client.get(`/console/waits?${query}`);
  expect(res.status, query).toBe(200);
  return res.text();
};

describe("pending waits", () => {
  it("filters by metadata key=value, every pair at once", async () => {
    expect(runsIn(await show("meta=team%3Dops"))).toEqual(["r-soon", "r-later"]);
    expect(runsIn(await show("meta=team%3Dops&meta=region%3Dus"))).toEqual(["r-later"]);
    expect(runsIn(await show("meta=team%3Dnobody"))).toEqual([]);
  });

  it("filters by deadline before and after (UTC, as the form sends it or RFC 3339)", async () => {
    const inTwoHours = new Date(Date.now() + 2 * HOUR).toISOString().slice(0, 19);
    expect(runsIn(await show(`deadline_before=${inTwoHours}`))).toEqual(["r-soon"]);
    expect(runsIn(await show(`deadline_after=${inTwoHours}`))).toEqual(["r-later"]);
    expect(runsIn(await show(`deadline_after=${encodeURIComponent(new Date(Date.now() - HOUR).toISOString())}&deadline_before=${inTwoHours}&meta=region%3Deu`))).toEqual(["r-soon"]);
  });

  it("filters by kind and signal and run", async () => {
    expect(runsIn(await show("kind=timer"))).toEqual(["r-nap"]);
    expect(runsIn(await show("kind=external&signal=approval"))).toEqual(["r-soon", "r-later", "r-open"]);
    expect(runsIn(await show("run=r-open"))).toEqual(["r-open"]);
  });

  it("a timer shows when it fires; a wait with no deadline says never", async () => {
    const timer = await show("kind=timer");
    expect(timer).toMatch(/fires in (1 h 59 min|2 h 0 min)<div class="sub"><time datetime="[^"]+">/);
    expect(timer).not.toContain(">never<");
    expect(await show("run=r-open")).toContain("<td>never</td>");
    expect(await show("run=r-soon")).toMatch(/times out in (29|30) min/);
  });

  it("pages by keyset, the filters kept in the next link", async () => {
    const first = await show("signal=bulk");
    expect(runsIn(first)).toHaveLength(50);
    const next = /<a href="([^"]+)" rel="next">/.exec(first)![1]!.replaceAll("&amp;", "&");
    expect(new URL(next, app.baseUrl).searchParams.get("signal")).toBe("bulk");
    const res = await client.get(next);
    expect(runsIn(await res.text())).toEqual(["bulk-50", "bulk-51", "bulk-52"]);
  });
});

describe("approvals inbox", () => {
  /** The run of each approval card, top to bottom. */
  const cardsIn = (page: string) => [...page.matchAll(/<span class="sub">for run<\/span> <a href="\/console\/runs\/[^"]+">([^<]+)<\/a>/g)].map((m) => m[1]);

  it("filters by metadata key=value, across approval types or within one, the filter kept in the form", async () => {
    const all = await (await client.get("/console/approvals")).text();
    expect(cardsIn(all)).toEqual(["r-soon", "r-later", "r-open"]);
    const ops = await (await client.get("/console/approvals?meta=team%3Dops")).text();
    expect(cardsIn(ops)).toEqual(["r-soon", "r-later"]);
    expect(ops).toContain('name="meta" value="team=ops"');
    expect(cardsIn(await (await client.get("/console/approvals?signal=approval&meta=team%3Dops&meta=region%3Dus")).text())).toEqual(["r-later"]);
    expect(cardsIn(await (await client.get("/console/approvals?meta=team%3Dnobody")).text())).toEqual([]);
  });

  it("a malformed metadata filter is named, not guessed at", async () => {
    const page = await (await client.get("/console/approvals?meta=no-equals-sign")).text();
    expect(page).toContain("Metadata “no-equals-sign”: write key=value.");
    expect(cardsIn(page)).toEqual([]);
  });
});
