import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Webhook } from "standardwebhooks";
import { startCallbackReceiver } from "./helpers/callback-receiver.ts";
import { openWait } from "./helpers/http.ts";
import { CALLBACK_SECRET, startTestApp, type TestApp } from "./helpers/test-app.ts";

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver();
});
afterAll(async () => {
  await app.close();
  await engine.close();
});

describe("the walk-through", () => {
  it("declares a type, opens a wait, sends a signal and delivers a signed callback", async () => {
    expect((await app.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);
    const { body: wait } = await openWait(app, "run-1", { signal: "approval", callback_url: engine.url }, 201);
    expect(wait.status).toBe("waiting");
    const sent = await fetch(`${app.baseUrl}/signals/run-1/approval`, { method: "POST", body: '{"approved":true}' });
    expect(sent.status).toBe(202);
    expect(await sent.json()).toMatchObject({ outcome: "received", sequence: 1, wait_id: wait.id });
    const [cb] = await engine.waitFor(1);
    expect(cb!.json.type).toBe("signal.received");
    expect(cb!.json.wait.status).toBe("received");
    const verified = new Webhook(CALLBACK_SECRET).verify(cb!.body, cb!.headers as Record<string, string>);
    expect(verified).toMatchObject({ type: "signal.received" });
  });
});
