import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { acceptSignals, type IntakeItem } from "../../src/signals/accept-signals.ts";
import { retryingRollbacks } from "../../src/db/transaction.ts";
import { newId } from "../../src/core/ids.ts";
import { body, declareType, openWait, send } from "../helpers/http.ts";
import { holdInSql, lockWaiters, releaseAllGates } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Continue-as-new against everything that may reach the old run at the same moment. The
// continue and intake / opening a wait each lock the run addressed first, and intake and waits
// read continued_as under that lock, so whatever commits first, nothing lands on a continued
// run and nothing is lost or applied twice.

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await declareType(app, "approval", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
});
afterEach(() => releaseAllGates());
afterAll(async () => {
  releaseAllGates();
  await app?.close();
});

type Json = Record<string, any>;
const continueRun = async (run: string, to: string) => {
  const res = await send(app, "POST", `/runs/${run}/continue`, { run_id: to });
  return { status: res.status, body: (await res.json()) as Json };
};
async function sendSignal(run: string, payload: unknown): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${app.baseUrl}/signals/${run}/approval`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload) });
  return { status: res.status, body: (await res.json()) as Json };
}
const signalRows = (run: string) =>
  app.database.sql<{ id: string; sequence: number; payload: string }[]>`select id, sequence::int, payload from signalbox.signals where run_id = ${run} order by sequence`;

describe("continue vs concurrent signals", () => {
  it("40 signals sent while the run continues each land exactly once, gapless on the new run, none on the old (10 rounds)", async () => {
    const landed = { onOld: 0, onNew: 0 };
    for (let round = 0; round < 10; round++) {
      const [from, to] = [`sig-old-${round}`, `sig-new-${round}`];
      const sends = Array.from({ length: 40 }, (_, i) => sendSignal(from, { i }));
      const continuing = new Promise((r) => setTimeout(r, round)).then(() => continueRun(from, to)); // lands somewhere among the 40
      const [answers, continued] = await Promise.all([Promise.all(sends), continuing]);
      expect(continued.status).toBe(200);
      for (const a of answers) {
        expect(a.status, JSON.stringify(a.body)).toBe(202);
        expect(a.body.outcome).toBe("buffered");
        expect([from, to]).toContain(a.body.run_id);
        landed[a.body.run_id === from ? "onOld" : "onNew"]++;
      }
      const rows = await signalRows(to);
      expect(rows.map((r) => r.sequence)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
      expect(new Set(rows.map((r) => r.id))).toEqual(new Set(answers.map((a) => a.body.signal_id)));
      expect((await signalRows(from)).length).toBe(0);
    }
    console.info(`continue vs 40 signals: ${landed.onOld} buffered on the old run then moved, ${landed.onNew} applied to the new run`);
  });

  it("a signal that waits for the old run's lock while the continue holds it goes to the new run", async () => {
    const gate = await holdInSql(app, "continue-run:locked", "held-old");
    const continuing = continueRun("held-old", "held-new");
    await gate.reached;
    const sending = sendSignal("held-old", { late: true });
    await lockWaiters(app.database.sql, 1);
    gate.release();
    const [continued, sent] = await Promise.all([continuing, sending]);
    expect(continued.status).toBe(200);
    expect(sent.body).toMatchObject({ outcome: "buffered", run_id: "held-new", sequence: 1 });
  });

  it("two batches whose chains cross deadlock at most once and are retried whole: every signal answered once", async () => {
    // Chains dx -> bx and cx -> ax. Batch 1 locks ax, then dx, then (following) bx; batch 2 locks
    // bx, then cx, then ax: each holds what the other wants next. Postgres aborts one (40P01),
    // and the batcher's retry runs it again after the other committed.
    await continueRun("dx", "bx");
    await continueRun("cx", "ax");
    const item = (run: string): IntakeItem => ({ id: newId("sg"), runId: run, signal: "approval", payload: "{}", payloadHash: run, idempotencyKey: null, bufferTtlS: 600 });
    const deadlocks = async () => Number((await app.database.sql<{ n: string }[]>`select deadlocks::text as n from pg_stat_database where datname = current_database()`)[0]!.n);
    const before = await deadlocks();
    const [holdA, holdB] = [await holdInSql(app, "accept-signals:locked", "ax"), await holdInSql(app, "accept-signals:locked", "bx")];
    const batch1 = retryingRollbacks(() => acceptSignals(app.deps.db, [item("ax"), item("dx")]));
    const batch2 = retryingRollbacks(() => acceptSignals(app.deps.db, [item("bx"), item("cx")]));
    await Promise.all([holdA.reached, holdB.reached]);
    holdA.release();
    holdB.release();
    const [one, two] = await Promise.all([batch1, batch2]);
    expect(one.map((a) => [a.outcome, a.runId])).toEqual([["buffered", "ax"], ["buffered", "bx"]]);
    expect(two.map((a) => [a.outcome, a.runId])).toEqual([["buffered", "bx"], ["buffered", "ax"]]);
    expect((await signalRows("ax")).map((r) => r.sequence)).toEqual([1, 2]);
    expect((await signalRows("bx")).map((r) => r.sequence)).toEqual([1, 2]);
    // Counted by the backend that found it, in statistics flushed within seconds of it going idle.
    await waitFor("the deadlock counted", deadlocks, { until: (n) => n > before, timeoutMs: 30_000 });
  });
});

describe("continue vs continue", () => {
  it("two continues of one run to different runs: one wins, the other is 409 already_continued (20 rounds)", async () => {
    for (let round = 0; round < 20; round++) {
      const run = `twice-${round}`;
      const [x, y] = await Promise.all([continueRun(run, `${run}-x`), continueRun(run, `${run}-y`)]);
      expect([x.status, y.status].sort()).toEqual([200, 409]);
      const loser = x.status === 409 ? x : y;
      const winner = x.status === 200 ? x : y;
      expect(loser.body).toMatchObject({ title: "already_continued", continued_as: winner.body.continued_as });
      expect((await body(app.api(`/runs/${run}`))).continued_as).toBe(winner.body.continued_as);
    }
  });

  it("A to B and B to A at once: one continues, the other is 409 continue_cycle, never a deadlock or 5xx (20 rounds)", async () => {
    for (let round = 0; round < 20; round++) {
      const [a, b] = [`loop-a-${round}`, `loop-b-${round}`];
      const [ab, ba] = await Promise.all([continueRun(a, b), continueRun(b, a)]);
      expect([ab.status, ba.status].sort(), JSON.stringify([ab.body, ba.body])).toEqual([200, 409]);
      expect((ab.status === 409 ? ab : ba).body.title).toBe("continue_cycle");
    }
  });
});

describe("continue vs a wait opened on the old run", () => {
  it("the wait is either opened on the old run and cancelled with reason continued, or opened on the new run (20 rounds)", async () => {
    const seen = { cancelledOnOld: 0, openOnNew: 0 };
    for (let round = 0; round < 20; round++) {
      const [from, to] = [`wait-old-${round}`, `wait-new-${round}`];
      const [opened, continued] = await Promise.all([openWait(app, from, { signal: "approval", key: "step-1" }), continueRun(from, to)]);
      expect(continued.status).toBe(200);
      expect(opened.status).toBe(201);
      const wait = await body(app.api(`/waits/${opened.body.id}`));
      if (wait.run_id === from) {
        expect(wait.status).toBe("cancelled");
        seen.cancelledOnOld++;
      } else {
        expect(wait).toMatchObject({ run_id: to, status: "waiting" });
        seen.openOnNew++;
      }
      const [open] = await app.database.sql<{ n: number }[]>`select count(*)::int as n from signalbox.waits where run_id = ${from} and status = 'waiting'`;
      expect(open!.n).toBe(0);
    }
    console.info(`continue vs open wait: ${seen.cancelledOnOld} opened on the old run and cancelled, ${seen.openOnNew} opened on the new run`);
  });

  it("a wait that waits for the old run's lock while the continue holds it opens on the new run", async () => {
    const gate = await holdInSql(app, "continue-run:locked", "held-wait-old");
    const continuing = continueRun("held-wait-old", "held-wait-new");
    await gate.reached;
    const opening = openWait(app, "held-wait-old", { signal: "approval" });
    await lockWaiters(app.database.sql, 1);
    gate.release();
    const [continued, opened] = await Promise.all([continuing, opening]);
    expect(continued.status).toBe(200);
    expect(opened).toMatchObject({ status: 201, body: { run_id: "held-wait-new", status: "waiting" } });
  });

  it("a continue that waits behind a wait being opened cancels that wait", async () => {
    const gate = await holdInSql(app, "open-wait:locked", "held-open-old");
    const opening = openWait(app, "held-open-old", { signal: "approval" });
    await gate.reached;
    const continuing = continueRun("held-open-old", "held-open-new");
    await lockWaiters(app.database.sql, 1);
    gate.release();
    const [opened, continued] = await Promise.all([opening, continuing]);
    expect(continued.status).toBe(200);
    expect(opened.body.run_id).toBe("held-open-old");
    expect(await body(app.api(`/waits/${opened.body.id}`))).toMatchObject({ status: "cancelled" });
  });
});
