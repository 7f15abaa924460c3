import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { body, declareType, openWait } from "../helpers/http.ts";
import { drainJobs } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// Callbacks in batches (issue 13, items 2 and 4): the callbacks that waits resolved together owe
// are graphile-worker batch jobs (arrays of wait ids, up to 100 each) enqueued in the resolving
// transaction; a batch is read, sent and recorded together, and an attempt that did not deliver
// is retried on its own, with our backoff, under the wait's own key. Every guarantee holds: each
// callback arrives (at least once) with its resolution event as webhook-id, each attempt is
// recorded once.

const receivers: Array<{ close(): Promise<void> }> = [];
let app: TestApp;
let idle: TestApp;

beforeAll(async () => {
  app = await startTestApp();
  idle = await startTestApp({ worker: false });
  for (const a of [app, idle]) await declareType(a, "approval");
});
afterAll(async () => {
  await Promise.all([app?.close(), idle?.close()]);
  await Promise.all(receivers.map((r) => r.close()));
});

describe("signalbox.enqueue_callbacks", () => {
  it("puts the callbacks of waits resolved together in batch jobs of at most 100, in the resolving transaction", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 250; i++) ids.push((await openWait(idle, `batch-${i}`, { signal: "approval", callback_url: "http://engine.invalid/resume" }, 201)).body.id);
    const sql = idle.database.sql;
    const jobsNow = () =>
      sql<{ payload: unknown; key: string | null }[]>`
        select j.payload, j.key from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
        where t.identifier = 'deliver_callback' order by j.id`;
    // Rolled back: no job either.
    await sql.begin(async (tx) => {
      await tx`select count(*) from signalbox.resolve_waits(${ids}::text[], 'cancelled')`;
      await tx`select 1/0`;
    }).catch(() => {});
    expect(await jobsNow()).toEqual([]);

    await sql`select count(*) from signalbox.resolve_waits(${ids}::text[], 'cancelled')`;
    const jobs = await jobsNow();
    expect(jobs.map((j) => (j.payload as string[]).length)).toEqual([100, 100, 50]);
    expect(jobs.every((j) => j.key === null)).toBe(true);
    expect(jobs.flatMap((j) => j.payload as string[])).toEqual(ids);
  });
});

describe("a burst of timeouts", () => {
  it("every callback arrives with its event's webhook-id; those that failed are retried alone and recorded once each", async () => {
    // Every fifth wait's first attempt is answered 503.
    const failOnce = new Set<string>();
    const engine = await startCallbackReceiver((_n, cb) => {
      const id = cb.json.wait.id;
      const run = String(cb.json.wait.run_id);
      if (run.endsWith("0") || run.endsWith("5")) {
        if (!failOnce.has(id)) {
          failOnce.add(id);
          return 503;
        }
      }
      return 204;
    });
    receivers.push(engine);
    const ids: string[] = [];
    for (let i = 0; i < 300; i++) ids.push((await openWait(app, `burst-${i}`, { signal: "approval", timeout_s: 600, callback_url: engine.url }, 201)).body.id);
    await advanceClock(app, 600);
    await engine.waitFor(300 + 60, 30_000);
    await drainJobs(app, { tasks: ["deliver_callback", "expire_wait"] });

    const byWait = new Map<string, string[]>();
    for (const cb of engine.received) byWait.set(cb.json.wait.id, [...(byWait.get(cb.json.wait.id) ?? []), cb.headers["webhook-id"] as string]);
    expect(byWait.size).toBe(300);
    for (const id of ids) {
      const wait = await body(app.api(`/waits/${id}`));
      expect(wait.status).toBe("timed_out");
      const failedFirst = failOnce.has(id);
      expect(wait.delivery).toEqual({ status: "delivered", attempts: failedFirst ? 2 : 1, last_error: null });
      const sent = byWait.get(id)!;
      expect(sent).toHaveLength(failedFirst ? 2 : 1);
      expect(new Set(sent).size).toBe(1); // the same webhook-id on the retry
      const { items } = await body(app.api(`/waits/${id}/deliveries`));
      expect(items.map((a: { webhook_id: string }) => a.webhook_id)).toEqual(sent);
      expect(items.map((a: { outcome: string }) => a.outcome)).toEqual(failedFirst ? ["retry", "delivered"] : ["delivered"]);
    }
    expect(failOnce.size).toBe(60);
  });
});
