import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { declareType, intake } from "../helpers/http.ts";
import { heapKiB } from "../helpers/probes.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

const heapMiB = () => heapKiB() / 1024;

/** A flood of made-up signal names (anyone may POST to any name) must not grow the process. */
describe("signals to names that are no signal type", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
    await declareType(app, "approval");
  });
  afterAll(() => app.close());

  it("are 404, and the names are not kept past a small bound; declared types stay cached", async () => {
    const cache = app.deps.signalTypeCache!;
    await intake(app, "run-1", "approval", "{}"); // the declared type is cached now
    const before = heapMiB();
    const names = 5_000; // five times the bound
    for (let sent = 0; sent < names; sent += 50) {
      const answers = await Promise.all(Array.from({ length: 50 }, () => intake(app, "run-1", `made-up-${randomBytes(12).toString("hex")}`, "{}")));
      for (const a of answers) expect(a.status).toBe(404);
    }
    expect(cache.size).toBeLessThanOrEqual(1_001);
    expect(heapMiB() - before).toBeLessThan(20);
    // The declared type was not pushed out by the flood: answered from memory, with no database to ask.
    const noDatabase = {} as typeof app.deps.db;
    expect(await cache.get(noDatabase, "approval")).toMatchObject({ name: "approval" });
  }, 120_000);
});
