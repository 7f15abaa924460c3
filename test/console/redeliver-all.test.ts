import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { signInConsole, type ConsoleClient } from "./console-client.ts";

// "Redeliver all matching" over more failing deliveries than one page of its walk (100): each
// redelivery gives its wait a newer failing attempt, which moves it to the end of the listing the
// walk is still paging through. One press must still send each delivery again once.
// The engine answers 400: every round fails at its first attempt (and a 4xx does not back the host off).

const WAITS = 250;

let app: TestApp;
let client: ConsoleClient;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
let waitIds: string[];

type WaitBody = { delivery: { status: string; attempts: number } };
const getWait = async (id: string) => (await (await app.api(`/waits/${id}`)).json()) as WaitBody;

beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver(() => 400);
  await declareType(app, "approval", { auth: { scheme: "none" } });
  waitIds = [];
  for (let i = 0; i < WAITS; i += 25) {
    const batch = await Promise.all(
      Array.from({ length: 25 }, async (_, j) => {
        const run = `order-${i + j}`;
        const { body: wait } = await openWait(app, run, { signal: "approval", callback_url: engine.url }, 201);
        expect((await intake(app, run, "approval", "{}")).status).toBe(202);
        return wait.id as string;
      }),
    );
    waitIds.push(...batch);
  }
  await engine.waitFor(WAITS, 30_000);
  await waitFor("every delivery to fail", () => Promise.all(waitIds.map(getWait)), { until: (ws) => ws.every((w) => w.delivery.status === "failed"), timeoutMs: 30_000 });
  client = await signInConsole(app);
}, 120_000);
afterAll(async () => {
  await engine?.close();
  await app?.close();
});

describe("'redeliver all' over several pages", () => {
  it("sends each matching delivery again once per press, though redeliveries fail again while the walk goes on", async () => {
    const before = engine.received.length;
    const res = await client.post("/console/deliveries/redeliver", { status: "failed" });
    expect(res.status).toBe(303);
    await engine.waitFor(before + WAITS, 30_000);
    // Whatever the walk queued has had time to be sent: let stragglers arrive before counting.
    await waitFor("every redelivery to fail", () => Promise.all(waitIds.map(getWait)), { until: (ws) => ws.every((w) => w.delivery.status === "failed"), timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, 500));
    const perWait = new Map<string, number>();
    for (const cb of engine.received.slice(before)) perWait.set(cb.json.wait.id, (perWait.get(cb.json.wait.id) ?? 0) + 1);
    const twice = [...perWait].filter(([, n]) => n > 1);
    expect(twice, `${twice.length} waits were redelivered more than once`).toEqual([]);
    expect(perWait.size).toBe(WAITS);
    expect(new URL(res.headers.get("location")!, app.baseUrl).searchParams.get("redelivered")).toBe(String(WAITS));
  }, 90_000);
});
