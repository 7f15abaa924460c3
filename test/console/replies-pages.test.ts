import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonAnswer, startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { signInConsole, type ConsoleClient } from "./console-client.ts";

// The console shows a callback's reply where the operator looks for it: the run page's waits
// (the Callback column) and the signal's own page, linked from the signal log.

let app: TestApp;
let client: ConsoleClient;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
let signalId: string;

beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver(() => jsonAnswer({ next_step: "<b>ship</b>", items: 3 }));
  await declareType(app, "approval");
  await openWait(app, "order-r1", { signal: "approval", callback_url: engine.url }, 201);
  const sent = await intake(app, "order-r1", "approval?wait_s=10", "{}");
  expect(sent.status, sent.text).toBe(200);
  signalId = sent.body!.signal_id as string;
  client = await signInConsole(app);
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
});

describe("replies in the console", () => {
  it("the run page shows each wait's reply, escaped", async () => {
    const page = await (await client.get("/console/runs/order-r1")).text();
    expect(page).toContain('<details class="reply"><summary>reply</summary>');
    expect(page).toContain("&quot;next_step&quot;: &quot;&lt;b&gt;ship&lt;/b&gt;&quot;");
    expect(page).not.toContain("<b>ship");
  });

  it("the signal log links each signal to its page, which shows the reply", async () => {
    const log = await (await client.get("/console/signals")).text();
    expect(log).toContain(`<a href="/console/signals/${signalId}">${signalId}</a>`);
    const res = await client.get(`/console/signals/${signalId}`);
    expect(res.status).toBe(200);
    const page = await res.text();
    // Stored as jsonb: keys come back in jsonb's order (shorter first), the values as answered.
    expect(page).toMatch(/<dd id="signal-reply"><pre class="json">\{\n {2}&quot;items&quot;: 3,\n {2}&quot;next_step&quot;: &quot;&lt;b&gt;ship&lt;\/b&gt;&quot;\n\}<\/pre><\/dd>/);
    expect(page).toContain("<dt>Callback</dt><dd>delivered</dd>");
  });

  it("an unknown or malformed signal id is a 404 or 400 page", async () => {
    expect((await client.get("/console/signals/sg_nothing0here")).status).toBe(404);
    expect((await client.get("/console/signals/not-an-id")).status).toBe(400);
  });
});
