import { afterAll, beforeAll, expect, it } from "vitest";
import { declareType, expectProblem } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// A URL's user and password are sent decoded, as Basic auth: one that cannot be decoded could
// never be sent (every attempt failed until the delivery gave up), so it is refused up front.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await declareType(app, "approval");
});
afterAll(() => app?.close());

it.each(["http://%E0:x@127.0.0.1:9/", "http://user:%ZZ@127.0.0.1:9/"])("%s as a callback_url or notify_url is a 400 that changes nothing", async (url) => {
  const problem = await expectProblem(await app.api("/runs/r-userinfo/waits", { method: "POST", json: { signal: "approval", callback_url: url } }), 400);
  expect(JSON.stringify(problem.validation_errors)).toMatch(/percent-encoding/);
  await expectProblem(await app.api("/signal-types/notified", { method: "PUT", json: { auth: { scheme: "none" }, notify_url: url } }), 400);
  expect(((await (await app.api("/runs/r-userinfo/waits")).json()) as { items: unknown[] }).items).toEqual([]);
  expect((await app.api("/signal-types/notified")).status).toBe(404);
});

it("a URL with valid percent-encoded credentials is accepted", async () => {
  expect((await app.api("/runs/r-userinfo-ok/waits", { method: "POST", json: { signal: "approval", callback_url: "http://us%40er:p%3Ass@127.0.0.1:9/" } })).status).toBe(201);
});
