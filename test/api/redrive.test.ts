import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { advanceClock } from "../helpers/clock.ts";
import { body, declareType, expectProblem, intake, openWait, readAll } from "../helpers/http.ts";
import { lockWaiters } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// POST /signals/redrive: a dead letter's stored payload sent again through intake, at most once.

let app: TestApp;
let sql: postgres.Sql;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  sql = postgres(app.databaseUrl, { max: 2, onnotice: () => {} });
  await declareType(app, "approval", { schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" } } }, auth: { scheme: "none" } });
  await declareType(app, "buffered", { auth: { scheme: "none" }, buffer_ttl_s: 60 });
  await declareType(app, "anything", { auth: { scheme: "none" } });
});
afterAll(async () => {
  await sql?.end();
  await app?.close();
});

interface SignalRecord {
  id: string;
  sequence: number | null;
  outcome: string;
  payload: unknown;
  idempotency_key: string | null;
  redriven_from: string | null;
  redriven_as: string | null;
}
const signalLog = async (run: string) => (await readAll<SignalRecord>(app, `/runs/${run}/signals`, 500)).items;
const redrive = (json: unknown, headers: Record<string, string> = {}) => app.api("/signals/redrive", { method: "POST", json, headers });
const signalCount = async () => Number((await sql<{ n: number }[]>`select count(*)::int as n from signalbox.signals`)[0]!.n);

/** A signal rejected for want of an open wait: its id. */
async function deadLetter(run: string, signal: string, payload: string, headers: Record<string, string> = {}): Promise<string> {
  const r = await intake(app, run, signal, payload, headers);
  expect(r.body, r.text).toMatchObject({ outcome: "rejected_not_waiting" });
  return r.body!.signal_id as string;
}

describe("redriving one signal", () => {
  it("sends the payload again to the run and name; the wait opened since receives it; the records point at each other", async () => {
    const dead = await deadLetter("rd-1", "approval", '{"approved": true}');
    const { body: wait } = await openWait(app, "rd-1", { signal: "approval" }, 201);

    const res = await redrive({ signal_id: dead });
    expect(res.status).toBe(202);
    const answer = (await res.json()) as { signal_id: string };
    expect(answer).toEqual({ outcome: "received", signal_id: expect.stringMatching(/^sg_/), sequence: 1, wait_id: wait.id, run_id: "rd-1", redriven_from: dead });
    expect(await body(app.api(`/waits/${wait.id}`))).toMatchObject({ status: "received", result: { signal_id: answer.signal_id, payload: { approved: true } } });

    const log = await signalLog("rd-1");
    expect(log.map((s) => [s.id, s.outcome, s.redriven_from, s.redriven_as])).toEqual([
      [dead, "rejected_not_waiting", null, answer.signal_id],
      [answer.signal_id, "received", dead, null],
    ]);
  });

  it("a second time is 409 already_redriven, naming the first redrive, and changes nothing", async () => {
    const dead = await deadLetter("rd-2", "approval", '{"approved": false}');
    await openWait(app, "rd-2", { signal: "approval" }, 201);
    const first = await body(redrive({ signal_id: dead }));
    const before = await signalCount();
    const again = await expectProblem(await redrive({ signal_id: dead }), 409);
    expect(again).toMatchObject({ title: "already_redriven", type: "https://signalbox.dev/problems/already-redriven", redriven_as: first.signal_id });
    expect(again.outcome).toBeUndefined(); // not an intake answer: nothing was sent
    expect(await signalCount()).toBe(before);
  });

  it("still no wait: intake's own answer (409 rejected_not_waiting), a new dead letter that can itself be redriven later", async () => {
    const dead = await deadLetter("rd-3", "approval", '{"approved": true}');
    const res = await redrive({ signal_id: dead });
    const problem = await expectProblem(res, 409);
    expect(problem).toMatchObject({ outcome: "rejected_not_waiting", signal_id: expect.stringMatching(/^sg_/), redriven_from: dead });
    const second = problem.signal_id as string;
    expect(second).not.toBe(dead);

    expect((await expectProblem(await redrive({ signal_id: dead }), 409)).title).toBe("already_redriven");
    await openWait(app, "rd-3", { signal: "approval" }, 201);
    expect(await body(redrive({ signal_id: second }))).toMatchObject({ outcome: "received", redriven_from: second });
    expect((await signalLog("rd-3")).map((s) => [s.outcome, s.redriven_from])).toEqual([
      ["rejected_not_waiting", null],
      ["rejected_not_waiting", dead],
      ["received", second],
    ]);
  });

  it("an expired buffered signal is sent again (without its key, which its record keeps) and takes the next sequence", async () => {
    const buffered = await intake(app, "rd-exp", "buffered", '{"n": 1}', { "idempotency-key": "k-exp" });
    expect(buffered.body).toMatchObject({ outcome: "buffered", sequence: 1 });
    await advanceClock(app, 61);
    expect((await signalLog("rd-exp"))[0]).toMatchObject({ outcome: "expired" });

    const answer = await body(redrive({ signal_id: buffered.body!.signal_id }));
    expect(answer).toMatchObject({ outcome: "buffered", sequence: 2, redriven_from: buffered.body!.signal_id });
    const { body: wait } = await openWait(app, "rd-exp", { signal: "buffered" }, 201);
    expect(wait).toMatchObject({ status: "received", result: { signal_id: answer.signal_id, payload: { n: 1 } } });
    // The sender's retry is still the expired record's duplicate, as before the redrive.
    expect((await intake(app, "rd-exp", "buffered", '{"n": 1}', { "idempotency-key": "k-exp" })).body).toMatchObject({ outcome: "duplicate", signal_id: buffered.body!.signal_id });
  });

  it("the sender's key goes with the payload: a retry of theirs accepted since makes the redrive a duplicate, nothing sent twice", async () => {
    const dead = await deadLetter("rd-key", "approval", '{"approved": true}', { "idempotency-key": "k-1" });
    const { body: wait } = await openWait(app, "rd-key", { signal: "approval" }, 201);
    const retried = await intake(app, "rd-key", "approval", '{"approved": true}', { "idempotency-key": "k-1" });
    expect(retried.body).toMatchObject({ outcome: "received", wait_id: wait.id });

    const res = await redrive({ signal_id: dead });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ outcome: "duplicate", signal_id: retried.body!.signal_id, sequence: 1, wait_id: wait.id, run_id: "rd-key", redriven_from: dead });
    expect((await signalLog("rd-key")).map((s) => s.outcome)).toEqual(["rejected_not_waiting", "received"]);
  });

  it("the payload is checked against the type's current schema: rejected before, accepted once the schema allows it", async () => {
    await declareType(app, "evolving", { schema: { type: "object", required: ["n"], properties: { n: { type: "integer" } } }, auth: { scheme: "none" } });
    await openWait(app, "rd-schema", { signal: "evolving" }, 201);
    const bad = await intake(app, "rd-schema", "evolving", '{"n": "seven"}');
    expect(bad.body).toMatchObject({ outcome: "rejected_invalid_payload" });

    const still = await expectProblem(await redrive({ signal_id: bad.body!.signal_id }), 422);
    expect(still).toMatchObject({ outcome: "rejected_invalid_payload", redriven_from: bad.body!.signal_id, validation_errors: [{ path: "/n" }] });

    await declareType(app, "evolving", { schema: { type: "object", required: ["n"], properties: { n: { type: ["integer", "string"] } } }, auth: { scheme: "none" } });
    expect(await body(redrive({ signal_id: still.signal_id }))).toMatchObject({ outcome: "received", redriven_from: still.signal_id });
  });

  it("a payload over 4 KiB was not kept: 422 payload_not_kept, with its size, and nothing recorded", async () => {
    const big = JSON.stringify({ approved: true, pad: "x".repeat(5000) });
    const dead = await deadLetter("rd-big", "approval", big);
    const before = await signalCount();
    const problem = await expectProblem(await redrive({ signal_id: dead }), 422);
    expect(problem).toMatchObject({ title: "payload_not_kept", type: "https://signalbox.dev/problems/payload-not-kept", payload_bytes: Buffer.byteLength(big) });
    expect(problem.detail).toMatch(/4,096 bytes/);
    expect(await signalCount()).toBe(before);
  });

  it("what is not a dead letter is 409 not_redrivable: a received signal, a buffered one still in its TTL", async () => {
    await openWait(app, "rd-no", { signal: "approval" }, 201);
    const received = await intake(app, "rd-no", "approval", '{"approved": true}');
    const buffered = await intake(app, "rd-no", "buffered", "{}");
    for (const [id, outcome] of [[received.body!.signal_id, "received"], [buffered.body!.signal_id, "buffered"]]) {
      expect(await expectProblem(await redrive({ signal_id: id }), 409)).toMatchObject({ title: "not_redrivable", signal_outcome: outcome });
    }
  });

  it("bad input is a 4xx problem that changes nothing; management auth only", async () => {
    const dead = await deadLetter("rd-bad", "anything", "{}");
    const before = await signalCount();
    expect((await expectProblem(await redrive({ signal_id: "sg_nope" }), 404)).detail).toMatch(/sg_nope/);
    for (const bad of [{}, { signal_id: dead, filter: {} }, { signal_id: dead, extra: 1 }, { filter: { outcome: "received" } }, { filter: { before: "yesterday" } }, { filter: { before: "0000-01-01T00:00:00Z" } }, { filter: { before: "0000-06-15T12:00:00+05:00" } }, { filter: { run: "a/b" } }, { signal_id: 7 }]) {
      const problem = await expectProblem(await redrive(bad), 400);
      expect(problem.validation_errors?.length, JSON.stringify(bad)).toBeGreaterThan(0);
    }
    await expectProblem(await redrive({ signal_id: dead }, { authorization: "" }), 401);
    await expectProblem(await redrive({ signal_id: dead }, { authorization: "Bearer wrong" }), 401);
    expect(await signalCount()).toBe(before);
    expect((await signalLog("rd-bad"))[0]!.redriven_as).toBeNull();
  });
});

describe("concurrent redrives of one signal", () => {
  it("exactly one wins, however they interleave (20 rounds of 6)", async () => {
    for (let round = 0; round < 20; round++) {
      const run = `rd-race-${round}`;
      const dead = await deadLetter(run, "approval", `{"approved": true, "round": ${round}}`);
      await openWait(app, run, { signal: "approval" }, 201);
      const answers = await Promise.all(Array.from({ length: 6 }, () => redrive({ signal_id: dead }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }))));
      const won = answers.filter((a) => a.status === 202);
      expect(won, JSON.stringify(answers)).toHaveLength(1);
      expect(won[0]!.body).toMatchObject({ outcome: "received", redriven_from: dead });
      for (const lost of answers.filter((a) => a.status !== 202)) expect(lost).toMatchObject({ status: 409, body: { title: "already_redriven", redriven_as: won[0]!.body.signal_id } });
      expect((await signalLog(run)).filter((s) => s.redriven_from === dead)).toHaveLength(1);
    }
  });

  it("all in flight at once, held on the dead letter's row lock, then released: one wins", async () => {
    const dead = await deadLetter("rd-held", "approval", '{"approved": true}');
    await openWait(app, "rd-held", { signal: "approval" }, 201);
    const held = sql.reserve();
    const conn = await held;
    try {
      await conn`begin`;
      await conn`select 1 from signalbox.signals where id = ${dead} for update`;
      const pending = Array.from({ length: 5 }, () => redrive({ signal_id: dead }).then((r) => r.status));
      await lockWaiters(sql, 5);
      await conn`commit`;
      expect((await Promise.all(pending)).sort()).toEqual([202, 409, 409, 409, 409]);
    } finally {
      conn.release();
    }
  });
});

describe("redriving by filter", () => {
  it("redrives every match, oldest first, and answers counts per outcome; a run's signals keep their order", async () => {
    await declareType(app, "late", { auth: { scheme: "none" } }); // no buffering: signals before the wait are dead letters
    const first = await deadLetter("rf-1", "late", '{"n": 1}');
    const second = await deadLetter("rf-1", "late", '{"n": 2}');
    await deadLetter("rf-2", "late", '{"n": 3}');
    await deadLetter("rf-1", "approval", '{"approved": true}'); // another name: not matched
    const big = await deadLetter("rf-3", "late", JSON.stringify({ pad: "x".repeat(5000) }));
    await openWait(app, "rf-2", { signal: "late" }, 201);
    // The fix: the type buffers now, so the redriven signals wait for their run's next waits.
    await declareType(app, "late", { auth: { scheme: "none" }, buffer_ttl_s: 600 });

    const res = await redrive({ filter: { signal: "late" } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ redriven: 3, outcomes: { buffered: 2, received: 1 }, skipped: { payload_not_kept: 1, already_redriven: 0 }, more: false });

    const log = await signalLog("rf-1");
    const copies = log.filter((s) => s.redriven_from !== null);
    expect(copies.map((s) => [s.redriven_from, s.outcome, s.sequence])).toEqual([
      [first, "buffered", 1],
      [second, "buffered", 2],
    ]);
    expect((await signalLog("rf-3"))[0]).toMatchObject({ id: big, redriven_as: null });
    // Everything that could go is gone: the same request again sends nothing.
    expect(await body(redrive({ filter: { signal: "late" } }))).toEqual({ redriven: 0, outcomes: {}, skipped: { payload_not_kept: 1, already_redriven: 0 }, more: false });
  });

  it("narrows by run, outcome and before", async () => {
    await declareType(app, "narrow", { auth: { scheme: "none" } });
    await declareType(app, "narrow-buffered", { auth: { scheme: "none" }, buffer_ttl_s: 30 });
    const old = await deadLetter("rn-1", "narrow", "{}");
    // Just after the first, to the microsecond (a JS Date would round it to milliseconds).
    const [row] = await sql<{ at: string }[]>`
      select to_char((received_at + interval '1 microsecond') at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as at from signalbox.signals where id = ${old}`;
    const later = await deadLetter("rn-1", "narrow", "{}");
    const otherRun = await deadLetter("rn-2", "narrow", "{}");
    const expired = (await intake(app, "rn-1", "narrow-buffered", "{}")).body!.signal_id as string;
    await advanceClock(app, 31);

    expect(await body(redrive({ filter: { run: "rn-1", signal: "narrow", before: row!.at } }))).toMatchObject({ redriven: 1 });
    expect(await body(redrive({ filter: { run: "rn-1", outcome: "expired" } }))).toMatchObject({ redriven: 1, outcomes: { buffered: 1 } });
    const redrivenNow = async () => new Set((await sql<{ from: string }[]>`select redriven_from as from from signalbox.signals where redriven_from is not null`).map((r) => r.from));
    let done = await redrivenNow();
    expect([old, later, otherRun, expired].map((id) => done.has(id))).toEqual([true, false, false, true]);

    // The rest of rn-1: `later`, and the dead letter the first redrive made (still no wait).
    expect(await body(redrive({ filter: { run: "rn-1" } }))).toMatchObject({ redriven: 2, outcomes: { rejected_not_waiting: 2 } });
    done = await redrivenNow();
    expect([later, otherRun].map((id) => done.has(id))).toEqual([true, false]);
  });

  it("two bulk redrives at once send each dead letter once between them", async () => {
    await declareType(app, "bulk", { auth: { scheme: "none" } });
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push(await deadLetter(`rb-${i % 5}`, "bulk", `{"i": ${i}}`));
    const [a, b] = await Promise.all([body(redrive({ filter: { signal: "bulk" } })), body(redrive({ filter: { signal: "bulk" } }))]);
    expect(a.redriven + b.redriven).toBe(30);
    const copies = await sql<{ from: string; n: number }[]>`
      select redriven_from as from, count(*)::int as n from signalbox.signals where redriven_from = any(${ids}) group by redriven_from`;
    expect(copies).toHaveLength(30);
    expect(copies.every((c) => c.n === 1)).toBe(true);
  });
});
