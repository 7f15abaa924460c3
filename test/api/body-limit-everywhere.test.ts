import { afterAll, beforeAll, expect, it } from "vitest";
import { expectProblem } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// Every management POST caps its body (SIGNALBOX_MAX_BODY_BYTES) before reading it; the answer
// is the 413 its operation documents, and nothing changes.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false, env: { SIGNALBOX_MAX_BODY_BYTES: "1024" } });
});
afterAll(() => app?.close());

const big = JSON.stringify({ reason: "x".repeat(2048) });
it.each(["/runs/r1/cancel", "/runs/r1/pause", "/runs/r1/resume", "/runs/r1/continue", "/runs/r1/children", "/signals/redrive", "/waits/wt_x/cancel", "/waits/wt_x/redeliver"])(
  "POST %s over the limit: 413",
  async (path) => {
    await expectProblem(await app.api(path, { method: "POST", headers: { "content-type": "application/json" }, body: big }), 413);
    expect((await (await app.api("/runs/r1")).json()) as { status?: string }).not.toMatchObject({ status: "cancelled" });
  },
);
