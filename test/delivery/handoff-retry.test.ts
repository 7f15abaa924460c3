import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeliveryEngine } from "../../src/delivery/delivery-engine.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// A callback handed off (unanswered after HAND_OFF_MS) whose answer, a 503, comes
// while its batch job is still busy with another callback. The background record queues the
// retry at the wait's backoff (0.05 s here); the batch job then adds "the job due after the
// limit" under the same key, replacing that retry: attempt 2 went ~12 s later
// instead of 0.05 s. The background record now waits for that job to be queued.

let app: TestApp;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  app = await startTestApp({ worker: false, env: { SIGNALBOX_DELIVERY_ENDPOINT_FAILURES: "1000" } });
  await declareType(app, "approval", { auth: { scheme: "none" } });
});
afterAll(async () => {
  await app?.close();
  await Promise.all(closers.map((c) => c()));
});

async function resolved(run: string, url: string): Promise<string> {
  const wait = (await openWait(app, run, { signal: "approval", callback_url: url }, 201)).body as { id: string };
  expect((await intake(app, run, "approval", "{}")).status).toBe(202);
  return wait.id;
}

describe("a handed-off callback answered with a retryable status while its batch is still running", () => {
  it("is retried after the wait's backoff, not after the attempt's time limit", async () => {
    const late503 = await startCallbackReceiver(() => new Promise((r) => setTimeout(() => r(503), 1_150)));
    const slowOk = await startCallbackReceiver((n) => new Promise((r) => setTimeout(() => r(204), n === 1 ? 800 : 900)));
    closers.push(late503.close, slowOk.close);
    const a = await resolved("handoff-a", late503.url);
    const y1 = await resolved("handoff-y1", slowOk.url);
    const y2 = await resolved("handoff-y2", slowOk.url);
    // One request at a time per endpoint: y2 waits for y1's slot, so the batch runs ~1.7 s.
    const engine = new DeliveryEngine(app.deps, { perEndpoint: 1, failuresToBackOff: 1000 });
    await engine.deliver([a, y1, y2]);
    await new Promise((r) => setTimeout(r, 300)); // the background record, if it has not come yet

    const sql = app.database.sql;
    const [w] = await sql<{ delivery_status: string; delivery_attempts: number }[]>`select delivery_status, delivery_attempts from signalbox.waits where id = ${a}`;
    expect(w).toEqual({ delivery_status: "pending", delivery_attempts: 1 });
    const [job] = await sql<{ due_in_s: number }[]>`select extract(epoch from run_at - now())::float8 as due_in_s from graphile_worker.jobs where key = ${"deliver:" + a}`;
    // Attempt 1 answered 503: attempt 2 is due 0.05 s after it (SIGNALBOX_DELIVERY_BACKOFF_S).
    expect(job!.due_in_s, "seconds until attempt 2").toBeLessThan(2);
    await engine.stop();
  });
});
