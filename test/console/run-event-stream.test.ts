import { afterAll, beforeAll, expect, it } from "vitest";
import { openWait } from "../helpers/http.ts";
import { openSse } from "../helpers/sse.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { signInConsole, type ConsoleClient } from "./console-client.ts";

// The run page's live events (GET /console/runs/{run}/events), as the API's stream reads them:
// an empty Last-Event-ID (an EventSource after an `id:` line with no value) is no last event.
let app: TestApp;
let cc: ConsoleClient;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await app.api(`/signal-types/approval`, { method: "PUT", json: { auth: { scheme: "none" } } });
  cc = await signInConsole(app);
});
afterAll(async () => {
  await app?.close();
});

it("an empty Last-Event-ID leaves ?after= in force", async () => {
  await openWait(app, "cs-1", { signal: "approval" }, 201);
  expect((await app.api("/signals/cs-1/approval", { method: "POST", json: { ok: true } })).status).toBe(202);
  const first = ((await (await app.api("/runs/cs-1/events?limit=1")).json()) as { items: Array<{ id: string }> }).items[0]!;
  const stream = openSse(`${app.baseUrl}/console/runs/cs-1/events?after=${first.id}`, { cookie: cc.cookie, "last-event-id": "" });
  await stream.until(() => stream.events.length >= 1);
  expect(stream.status).toBe(200);
  expect((JSON.parse(stream.events[0]!.data) as { type: string }).type).toBe("signal.received");
  await stream.close();
});
