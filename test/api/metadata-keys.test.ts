import { afterAll, beforeAll, expect, it } from "vitest";
import { declareType, expectProblem } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// `__proto__` as a metadata key: an object built from it takes it as its prototype, so it was
// dropped without a word (a wait stored `{}`, a filter on it matched every wait).
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await declareType(app, "t1");
});
afterAll(() => app?.close());

it("a wait's metadata with the key __proto__ is a 400 that opens nothing", async () => {
  const raw = (json: string) => app.api("/runs/r-proto/waits", { method: "POST", headers: { "content-type": "application/json" }, body: json });
  await expectProblem(await raw('{"signal":"t1","metadata":{"__proto__":"x"}}'), 400);
  await expectProblem(await raw('{"signal":"t1","all":[{"signal":"t1","metadata":{"__proto__":{"a":1}}}]}'), 400);
  expect(((await (await app.api("/runs/r-proto/waits")).json()) as { items: unknown[] }).items).toEqual([]);
});

it("a metadata.__proto__ filter is a 400, not a filter dropped (every wait listed)", async () => {
  expect((await app.api("/runs/r-other/waits", { method: "POST", json: { signal: "t1", metadata: { team: "y" } } })).status).toBe(201);
  await expectProblem(await app.api("/waits?metadata.__proto__=x"), 400);
});
