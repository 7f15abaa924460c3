import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { openWait } from "../helpers/http.ts";
import { signInConsole, type ConsoleClient } from "./console-client.ts";

// The approvals inbox offers answer buttons only for waits an answer can resolve: an external
// wait (POST /waits/{id}/links refuses the others: "links answer a wait for a signal from outside").
let app: TestApp;
let cc: ConsoleClient;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await app.api(`/signal-types/approval`, { method: "PUT", json: { auth: { scheme: "none" }, responses: ["approve", "reject"] } });
  cc = await signInConsole(app);
});
afterAll(async () => {
  await app?.close();
});

it("an external wait of the type is offered", async () => {
  const ext = (await openWait(app, "r-ext", { signal: "approval" }, 201)).body as { id: string };
  const inbox = await (await cc.get("/console/approvals")).text();
  expect(inbox).toContain(`action="/console/approvals/${ext.id}"`);
});

it("a timer wait that shares an approval type's name is not offered as an approval", async () => {
  const timer = (await openWait(app, "r-timer", { signal: "approval", timer: { delay_s: 3600 } }, 201)).body as { id: string; kind: string };
  expect(timer.kind).toBe("timer");
  const links = await app.api(`/waits/${timer.id}/links`, { method: "POST", json: { responder: "kim" } });
  expect(links.status).toBe(409); // the API says it is no approval
  for (const path of ["/console/approvals?signal=approval", "/console/approvals"]) {
    const inbox = await (await cc.get(path)).text();
    expect(inbox, path).not.toContain(`action="/console/approvals/${timer.id}"`);
  }
  // And answering it anyway says why, not "no longer waiting" for a wait that is waiting.
  const res = await cc.post(`/console/approvals/${timer.id}`, { response: "approve" });
  const wait = (await (await app.api(`/waits/${timer.id}`)).json()) as { status: string };
  expect(wait.status).toBe("waiting");
  expect(res.status).toBe(409);
  expect(res.headers.get("location")).not.toBe("/console/approvals?answered=rejected_not_waiting");
});
