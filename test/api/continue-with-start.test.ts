import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { body, declareType, intake, openWait, send } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Continue-as-new meets signal-with-start: a run some other run was continued as was started by
// its engine, so a start type's signal is kept for it, not a new run.start; and a started signal
// no wait has taken yet (no TTL) moves to the new run like any buffered one.

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
const startsFor = (run: string) => engine.received.filter((cb) => (cb.json as { type?: string; run_id?: string }).type === "run.start" && (cb.json as { run_id?: string }).run_id === run);

beforeAll(async () => {
  engine = await startCallbackReceiver();
  app = await startTestApp();
  await declareType(app, "order-placed", { auth: { scheme: "none" }, buffer_ttl_s: 60, start: { url: engine.url } });
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
});

const continueRun = (run: string, target: string) => send(app, "POST", `/runs/${encodeURIComponent(run)}/continue`, { run_id: target });

describe("continue-as-new with signal-with-start", () => {
  it("a run another was continued as is never started by a signal", async () => {
    await openWait(app, "cs-old", { signal: "order-placed" }, 201);
    expect((await continueRun("cs-old", "cs-new")).status).toBe(200);
    const sent = await intake(app, "cs-new", "order-placed", JSON.stringify({ n: 1 }));
    expect(sent.body).toMatchObject({ outcome: "buffered", run_id: "cs-new" });
    const wait = (await openWait(app, "cs-new", { signal: "order-placed" }, 201)).body;
    expect(wait).toMatchObject({ status: "received" });
    expect(startsFor("cs-new")).toHaveLength(0);
  });

  it("a started signal no wait has taken moves to the new run and its first wait takes it", async () => {
    const sent = await intake(app, "cs-started", "order-placed", JSON.stringify({ n: 1 }));
    expect(sent.body).toMatchObject({ outcome: "started", sequence: 1 });
    await waitFor("the run.start", () => startsFor("cs-started"), { until: (s) => s.length === 1 });
    expect((await continueRun("cs-started", "cs-started-2")).status).toBe(200);
    const moved = (await body(app.api("/runs/cs-started-2/signals"))).items as Array<Record<string, unknown>>;
    expect(moved).toMatchObject([{ id: (sent.body as { signal_id: string }).signal_id, sequence: 1 }]);
    const wait = (await openWait(app, "cs-started", { signal: "order-placed" }, 201)).body;
    expect(wait).toMatchObject({ run_id: "cs-started-2", status: "received" });
    expect(startsFor("cs-started-2")).toHaveLength(0);
  });
});
