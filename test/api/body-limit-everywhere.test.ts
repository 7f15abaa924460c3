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

// A body sent in chunks declares no length: it is counted as it comes.
const chunked = (text: string, pieces = 4): RequestInit => {
  const size = Math.ceil(text.length / pieces);
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let i = 0; i < text.length; i += size) controller.enqueue(new TextEncoder().encode(text.slice(i, i + size)));
      controller.close();
    },
  });
  return { method: "POST", headers: { "content-type": "application/json" }, body: stream, duplex: "half" } as RequestInit;
};

it("a chunked body over the limit: 413, and nothing changes", async () => {
  await expectProblem(await app.api("/runs/r2/cancel", chunked(big)), 413);
  expect((await (await app.api("/runs/r2")).json()) as { status?: string }).not.toMatchObject({ status: "cancelled" });
});

it("a chunked body within the limit is read: a malformed one is the validator's 400", async () => {
  await expectProblem(await app.api("/runs/r2/cancel", chunked('{"reason": "x", ')), 400);
});
