import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { body, declareType, intake } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { signInConsole, type ConsoleClient } from "./console-client.ts";

// Signal-with-start in the operator console: the signal type page names its start URL, the
// signal log shows the `started` outcome, and a failing run.start is on the deliveries page with
// its attempts and a Redeliver button (the verb of POST /runs/{run}/start/redeliver).

let app: TestApp;
let client: ConsoleClient;
let engineAnswer = 400;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
let signalId: string;

const startOf = async (run: string) => (await body(app.api(`/runs/${run}/start`))) as { delivery: { status: string; attempts: number } };

beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver(() => engineAnswer);
  await declareType(app, "order-placed", { description: "A shop order", auth: { scheme: "none" }, start: { url: engine.url } });
  const sent = await intake(app, "order-77", "order-placed", '{"total": 12}');
  expect(sent.body).toMatchObject({ outcome: "started" });
  signalId = sent.body!.signal_id as string;
  await waitFor("the start to fail", () => startOf("order-77"), { until: (s) => s.delivery.status === "failed" });
  client = await signInConsole(app);
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
});

describe("signal-with-start in the console", () => {
  it("the signal type page shows the start URL", async () => {
    const page = await (await client.get("/console/signal-types/order-placed")).text();
    expect(page).toContain("<dt>Starts runs</dt>");
    expect(page).toContain(engine.url);
    const plain = (await declareType(app, "plain", { auth: { scheme: "none" } })) as { start: unknown };
    expect(plain.start).toBeNull();
    expect(await (await client.get("/console/signal-types/plain")).text()).toMatch(/<dt>Starts runs<\/dt><dd>no<\/dd>/);
  });

  it("the signal log shows the started outcome, filterable, and not as a dead letter", async () => {
    const started = await (await client.get("/console/signals?outcome=started")).text();
    expect(started).toContain(signalId);
    expect(started).toMatch(/<span class="outcome[^"]*">started<\/span>/);
    expect(await (await client.get("/console/signals?outcome=rejected")).text()).not.toContain(signalId);
  });

  it("the overview counts a failing run.start among the failed deliveries", async () => {
    const overview = await (await client.get("/console/overview")).text();
    expect(overview).toMatch(/<dt>Failed deliveries<\/dt><dd><a href="[^"]*">1<\/a>/);
  });

  it("a failing run.start is on the deliveries page with its attempts, and its Redeliver button sends it again", async () => {
    const page = await (await client.get("/console/deliveries")).text();
    expect(page).toContain("run.start: order-placed");
    expect(page).toContain("run start (signal-with-start)");
    expect(page).toMatch(/<td>1<\/td><td><time[^>]*>[^<]*<\/time><\/td><td>400<\/td><td>HTTP 400<\/td><td>\d+ ms<\/td><td>failed<\/td>/);
    expect(page).toContain(`action="/console/deliveries/starts/order-77/redeliver"`);

    const forged = await client.post("/console/deliveries/starts/order-77/redeliver", { _csrf: "forged" });
    expect(forged.status).toBe(403);
    expect((await startOf("order-77")).delivery).toMatchObject({ status: "failed", attempts: 1 });

    engineAnswer = 204;
    const res = await client.post("/console/deliveries/starts/order-77/redeliver", { status: "failed" });
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/deliveries?status=failed&redelivered=1");
    await waitFor("the start to be delivered", () => startOf("order-77"), { until: (s) => s.delivery.status === "delivered" });
    expect(engine.received).toHaveLength(2);
    expect(await (await client.get("/console/deliveries")).text()).not.toContain("order-77");
    expect((await client.post("/console/deliveries/starts/bad%20run/redeliver", {})).status).toBe(400);
  });
});
