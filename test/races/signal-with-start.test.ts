import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { drainJobs, holdInSql, lockWaiters, releaseAllGates } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// Signal-with-start under real concurrency: "never seen" is decided under the run's lock, so 40
// first signals sent at once start the run exactly once (one `started`, numbered 1; the others
// `buffered` 2..40 in sequence order) and exactly one run.start reaches the engine. Repeated over
// fresh runs until it never shows otherwise.

const N = 40;
const ROUNDS = 8;
let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;

beforeAll(async () => {
  engine = await startCallbackReceiver();
  app = await startTestApp({ env: { SIGNALBOX_DB_POOL_SIZE: "10" } });
  await declareType(app, "order-placed", { auth: { scheme: "none" }, start: { url: engine.url } });
});
afterEach(() => releaseAllGates());
afterAll(async () => {
  await app?.close();
  await engine?.close();
});

const startsFor = (run: string) => engine.received.filter((cb) => (cb.json as unknown as { run_id: string }).run_id === run);

describe("40 concurrent first signals to a run never seen", () => {
  it(`start it exactly once, the others buffered in order (${ROUNDS} rounds)`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const run = `together-${round}`;
      const answers = await Promise.all(Array.from({ length: N }, (_, i) => intake(app, run, "order-placed", JSON.stringify({ i }))));
      expect(answers.every((a) => a.status === 202), JSON.stringify(answers.filter((a) => a.status !== 202))).toBe(true);
      const started = answers.filter((a) => a.body!.outcome === "started");
      expect(started, `round ${round}`).toHaveLength(1);
      expect(started[0]!.body).toMatchObject({ sequence: 1 });
      expect(answers.filter((a) => a.body!.outcome === "buffered")).toHaveLength(N - 1);
      expect(answers.map((a) => a.body!.sequence as number).sort((a, b) => a - b)).toEqual(Array.from({ length: N }, (_, i) => i + 1));

      // Successive waits take them in sequence order, the started one first.
      const bySequence = [...answers].sort((a, b) => a.body!.sequence - b.body!.sequence);
      for (const a of bySequence.slice(0, 3)) {
        const w = await openWait(app, run, { signal: "order-placed" }, 201);
        expect(w.body).toMatchObject({ status: "received", result: { signal_id: a.body!.signal_id, sequence: a.body!.sequence } });
      }
    }
    await drainJobs(app);
    for (let round = 0; round < ROUNDS; round++) {
      const run = `together-${round}`;
      expect(startsFor(run), run).toHaveLength(1);
      expect(startsFor(run)[0]!.json).toMatchObject({ type: "run.start", run_id: run, signal: { name: "order-placed" } });
    }
    const [row] = await app.database.sql<{ n: number }[]>`select count(*)::int as n from signalbox.run_starts where run_id like 'together-%'`;
    expect(row!.n).toBe(ROUNDS);
  });

  it("a wait opened while the first signal holds the run lock waits, then consumes the started signal", async () => {
    const held = await holdInSql(app, "accept-signals:locked", "held-start");
    const sending = intake(app, "held-start", "order-placed", '{"first": true}');
    expect(await held.reached).toBe("held-start");
    const opening = openWait(app, "held-start", { signal: "order-placed" });
    await lockWaiters(app.database.sql, 2); // the wait queues behind the signal's transaction (which waits on the gate)
    held.release();
    const [sent, opened] = await Promise.all([sending, opening]);
    expect(sent.body).toMatchObject({ outcome: "started", sequence: 1 });
    expect(opened).toMatchObject({ status: 201, body: { status: "received", result: { signal_id: sent.body!.signal_id } } });
    await drainJobs(app);
    expect(startsFor("held-start")).toHaveLength(1);
  });

  it("a first signal that finds the run's wait open is received: no start", async () => {
    await openWait(app, "wait-first", { signal: "order-placed" }, 201);
    const sent = await intake(app, "wait-first", "order-placed", "{}");
    expect(sent.body).toMatchObject({ outcome: "received", sequence: 1 });
    await drainJobs(app);
    expect(startsFor("wait-first")).toHaveLength(0);
  });
});
