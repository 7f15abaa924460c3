import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { purgeOldRecords } from "../../src/retention/purge-old-records.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { runDueJobs } from "../helpers/clock.ts";
import { body, declareType, intake } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// Retention of signal-with-start: a run start no longer pending goes after SIGNALBOX_RETENTION_DAYS
// with its recorded attempts, and a started signal never consumed (with those kept behind it, no
// TTL) goes by age like a dead letter; a start still pending stays. The runs row stays, so a run
// once started is never started again. Time is moved by backdating rows, never by sleeping.

const DAYS = 30;
let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;

beforeAll(async () => {
  engine = await startCallbackReceiver();
  app = await startTestApp({ worker: false, env: { SIGNALBOX_RETENTION_DAYS: String(DAYS) } });
  await declareType(app, "order-placed", { auth: { scheme: "none" }, start: { url: engine.url } });
});
afterAll(async () => {
  await app?.close();
  await engine?.close();
});

const db = () => app.database.sql;
const purge = () => purgeOldRecords(app.deps, { budgetMs: 60_000 });

async function age(run: string, days = DAYS + 10) {
  const back = `${days} days`;
  await db()`update signalbox.run_starts set occurred_at = occurred_at - ${back}::interval where run_id = ${run}`;
  await db()`update signalbox.events set occurred_at = occurred_at - ${back}::interval where run_id = ${run}`;
  await db()`update signalbox.signals set received_at = received_at - ${back}::interval where run_id = ${run}`;
}

async function rowsOf(run: string) {
  const [r] = await db()<Array<{ starts: number; attempts: number; signals: number; events: number; runs: number }>>`
    select (select count(*)::int from signalbox.run_starts where run_id = ${run}) as starts,
           (select count(*)::int from signalbox.delivery_attempts where start_run_id = ${run}) as attempts,
           (select count(*)::int from signalbox.signals where run_id = ${run}) as signals,
           (select count(*)::int from signalbox.events where run_id = ${run}) as events,
           (select count(*)::int from signalbox.runs where run_id = ${run}) as runs`;
  return r!;
}

describe("retention of run starts", () => {
  it("purges an old delivered start with its attempts and its unconsumed signals; the run is never started again", async () => {
    expect((await intake(app, "old-start", "order-placed", "{}")).body).toMatchObject({ outcome: "started" });
    expect((await intake(app, "old-start", "order-placed", "{}")).body).toMatchObject({ outcome: "buffered", sequence: 2 }); // kept behind it, no TTL
    await runDueJobs(app);
    expect((await body(app.api("/runs/old-start/start"))).delivery).toMatchObject({ status: "delivered", attempts: 1 });
    expect(await rowsOf("old-start")).toEqual({ starts: 1, attempts: 1, signals: 2, events: 2, runs: 1 });

    await age("old-start");
    const report = await purge();
    expect(report.totals.runStarts).toBe(1);
    expect(await rowsOf("old-start")).toEqual({ starts: 0, attempts: 0, signals: 0, events: 0, runs: 1 });

    // The run's sequence stayed: it is seen, so nothing starts it again.
    expect((await intake(app, "old-start", "order-placed", "{}")).body).toMatchObject({ outcome: "rejected_not_waiting" });
    await runDueJobs(app);
    expect(engine.received.filter((cb) => cb.body.includes('"old-start"'))).toHaveLength(1);
  });

  it("keeps a start still pending and anything recent", async () => {
    expect((await intake(app, "pending-start", "order-placed", "{}")).body).toMatchObject({ outcome: "started" });
    expect((await intake(app, "recent-start", "order-placed", "{}")).body).toMatchObject({ outcome: "started" });
    await runDueJobs(app);
    await age("pending-start");
    // Queued again (as a redelivery leaves it) and not yet sent: pending, so its job still needs it.
    await db()`update signalbox.run_starts set delivery_status = 'pending' where run_id = 'pending-start'`;
    await purge();
    expect((await rowsOf("pending-start")).starts).toBe(1);
    expect(await rowsOf("recent-start")).toMatchObject({ starts: 1, attempts: 1, signals: 1 });
  });
});
