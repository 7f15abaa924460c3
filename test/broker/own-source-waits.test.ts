import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { body, declareType, intake, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// A timer, sensor or composite wait raises its own signal (API.md: "its own source instead of
// waiting for an external sender"): a signal sent from outside under its name must not receive
// it, as opening such a wait does not take a buffered signal of its name.

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  for (const name of ["approval", "payment", "nap"]) await declareType(app, name, { auth: { scheme: "none" }, buffer_ttl_s: 60 });
});
afterAll(() => app?.close());

const waitOf = async (id: string) => body(app.api(`/waits/${id}`));

describe("a signal from outside under the name of a wait with its own source", () => {
  it("does not receive a timer wait: it is buffered, and the timer still waits", async () => {
    const { body: wait } = await openWait(app, "own-timer", { signal: "nap", timer: { delay_s: 3600 } }, 201);
    const res = await intake(app, "own-timer", "nap", JSON.stringify({ fired_at: "forged" }));
    expect(res.status).toBe(202);
    expect(res.body?.outcome).toBe("buffered");
    expect((await waitOf(wait.id)).status).toBe("waiting");
  });

  it("does not receive an `all` composite past its members", async () => {
    const { body: parent } = await openWait(app, "own-all", { signal: "approval", all: [{ signal: "payment" }, { signal: "legal", timer: { delay_s: 3600 } }] }, 201);
    expect((await intake(app, "own-all", "approval", JSON.stringify({ members: {} }))).body?.outcome).toBe("buffered");
    expect((await waitOf(parent.id)).status).toBe("waiting");
    // Its member for a signal from outside still takes one.
    expect((await intake(app, "own-all", "payment", "{}")).body?.outcome).toBe("received");
  });

  it("is not moved onto such a wait by continue-as-new", async () => {
    expect((await intake(app, "own-old", "nap", "{}")).body?.outcome).toBe("buffered");
    const { body: timer } = await openWait(app, "own-new", { signal: "nap", timer: { delay_s: 3600 } }, 201);
    expect((await app.api("/runs/own-old/continue", { method: "POST", json: { run_id: "own-new" } })).status).toBe(200);
    expect((await waitOf(timer.id)).status).toBe("waiting");
  });
});
