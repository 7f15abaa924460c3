import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { retryDelayS } from "../../src/delivery/classify-response.ts";
import { deliverCallback } from "../../src/delivery/deliver-callback.ts";
import { encodeCursor } from "../../src/core/pagination.ts";
import { purgeOldRecords } from "../../src/retention/purge-old-records.ts";
import { startCallbackReceiver, type ReceivedCallback } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { body, declareType, expectProblem, intake, openWait, readAll } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { logCapture } from "../helpers/probes.ts";
import { killServices, startService } from "../helpers/service-process.ts";
import { createTestDatabase, LINK_KEYS, startTestApp, useTestSql, type TestApp } from "../helpers/test-app.ts";

// Visible deliveries (issue 13, item 5): every callback attempt is recorded and listed per wait
// (GET /waits/{id}/deliveries) and, while failing, across waits (GET /deliveries); redeliver
// keeps the history and sends a pending retry now; a delivery that gives up logs one warning
// and counts in /metrics. Real server, real receivers, real Postgres; nothing is timed.

interface Attempt {
  id: string;
  wait_id: string;
  attempt: number;
  webhook_id: string;
  started_at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  outcome: "delivered" | "retry" | "failed";
  callback_host: string;
}
interface Failing {
  wait_id: string;
  run_id: string;
  signal: string;
  status: "pending" | "failed";
  callback_host: string;
  attempts: number;
  last_error: string | null;
  last_status_code: number | null;
  last_attempt_at: string;
}

const MAX_ATTEMPTS = 3;
/** Quick retries (the test app's backoff is 0.05 s), three attempts a round. */
let app: TestApp;
/** A retry an hour away: a callback that comes sooner was sent by a redelivery. */
let slowApp: TestApp;
const warnings = logCapture<{ level: number; msg: string; waitId?: string; callbackHost?: string; lastError?: string; attempts?: number; reason?: string }>();
const receivers: Array<{ close(): Promise<void> }> = [];

// These tests are about one wait's attempts: its endpoint is never backed off as a whole here
// (test/api/endpoint-isolation.test.ts is about that).
const NO_ENDPOINT_BACKOFF = { SIGNALBOX_DELIVERY_ENDPOINT_FAILURES: "1000" };

beforeAll(async () => {
  app = await startTestApp({ env: { ...NO_ENDPOINT_BACKOFF, SIGNALBOX_DELIVERY_MAX_ATTEMPTS: String(MAX_ATTEMPTS), LOG_LEVEL: "warn" }, logStream: warnings.stream });
  slowApp = await startTestApp({ env: { ...NO_ENDPOINT_BACKOFF, SIGNALBOX_DELIVERY_MAX_ATTEMPTS: String(MAX_ATTEMPTS), SIGNALBOX_DELIVERY_BACKOFF_S: "3600" } });
  for (const a of [app, slowApp]) await declareType(a, "approval");
});
afterAll(async () => {
  await Promise.all([app?.close(), slowApp?.close()]);
  await Promise.all(receivers.map((r) => r.close()));
});

async function receiver(respond: (n: number, cb: ReceivedCallback) => number | Promise<number>) {
  const r = await startCallbackReceiver(respond);
  receivers.push(r);
  return { ...r, host: new URL(r.url).host };
}

/** Opens a wait with this callback in its own run and signals it: its callback is then owed. */
async function resolvedWait(a: TestApp, run: string, callbackUrl: string): Promise<string> {
  const { status, body: wait } = await openWait(a, run, { signal: "approval", callback_url: callbackUrl });
  expect(status).toBe(201);
  expect((await intake(a, run, "approval", '{"approved":true}')).status).toBe(202);
  return wait.id as string;
}

const getWait = (a: TestApp, id: string) => body(a.api(`/waits/${id}`));
const settled = (a: TestApp, id: string, status: string) => waitFor(`delivery ${status}`, () => getWait(a, id), { until: (w) => w.delivery.status === status });
const attemptsOf = async (a: TestApp, id: string) => (await readAll<Attempt>(a, `/waits/${id}/deliveries`, 500)).items;

describe("GET /waits/{id}/deliveries", () => {
  it("lists every attempt oldest first: time, status code, error, duration, outcome, endpoint; paged", async () => {
    const engine = await receiver((n) => (n === 1 ? 500 : 200));
    const id = await resolvedWait(app, "listed-1", engine.url);
    const wait = await settled(app, id, "delivered");
    expect(wait.delivery).toEqual({ status: "delivered", attempts: 2, last_error: null });

    const all = await attemptsOf(app, id);
    const webhookId = engine.received[0]!.headers["webhook-id"];
    expect(all).toEqual([
      { id: expect.stringMatching(/^dl_\d+$/), wait_id: id, attempt: 1, webhook_id: webhookId, started_at: expect.any(String), duration_ms: expect.any(Number), status_code: 500, error: "HTTP 500", outcome: "retry", callback_host: engine.host },
      { id: expect.stringMatching(/^dl_\d+$/), wait_id: id, attempt: 2, webhook_id: webhookId, started_at: expect.any(String), duration_ms: expect.any(Number), status_code: 200, error: null, outcome: "delivered", callback_host: engine.host },
    ]);
    for (const a of all) expect(a.duration_ms).toBeGreaterThanOrEqual(0);
    expect(Date.parse(all[0]!.started_at)).toBeLessThanOrEqual(Date.parse(all[1]!.started_at));

    const first = await body(app.api(`/waits/${id}/deliveries?limit=1`));
    expect(first.items.map((a: Attempt) => a.attempt)).toEqual([1]);
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = await body(app.api(`/waits/${id}/deliveries?limit=1&cursor=${first.next_cursor}`));
    expect(second.items.map((a: Attempt) => a.attempt)).toEqual([2]);
    expect(second.next_cursor).toBeNull();
  });

  it("an attempt's time is when it was sent, not when it was recorded (a batch's attempts are recorded together)", async () => {
    const fast = await receiver(() => 204);
    const slow = await receiver(() => new Promise((r) => setTimeout(() => r(204), 800)));
    // Two waits timing out together: one delivery job sends both at once and records both once
    // the slow one has answered.
    const ids = [];
    for (const [run, engine] of [["sent-at-fast", fast], ["sent-at-slow", slow]] as const) {
      ids.push((await openWait(app, run, { signal: "approval", timeout_s: 30, callback_url: engine.url }, 201)).body.id as string);
    }
    await advanceClock(app, 30);
    for (const id of ids) await settled(app, id, "delivered");
    const [fastAttempt, slowAttempt] = (await Promise.all(ids.map(async (id) => (await attemptsOf(app, id))[0]!))) as [Attempt, Attempt];
    expect(slowAttempt.duration_ms).toBeGreaterThanOrEqual(700);
    expect(Math.abs(Date.parse(fastAttempt.started_at) - Date.parse(slowAttempt.started_at))).toBeLessThan(400);
  });

  it("no answer is a null status code with the error; the round's last attempt is failed", async () => {
    // Port 1: nothing listens there, and unlike a receiver's port closed here, the system never
    // hands it to a later receiver (whose host a later test lists by).
    const id = await resolvedWait(app, "listed-refused", "http://127.0.0.1:1/resume");
    await settled(app, id, "failed");
    const all = await attemptsOf(app, id);
    expect(all.map((a) => [a.attempt, a.status_code, a.error, a.outcome])).toEqual([
      [1, null, "request failed: ECONNREFUSED", "retry"],
      [2, null, "request failed: ECONNREFUSED", "retry"],
      [3, null, "request failed: ECONNREFUSED", "failed"],
    ]);
  });

  it("credentials in the callback URL go as Basic auth, and never into the recorded endpoint", async () => {
    const engine = await receiver(() => 204);
    const withCredentials = engine.url.replace("http://", "http://engine%40ops:s3cr%3At@");
    const id = await resolvedWait(app, "listed-userinfo", `${withCredentials}?token=abc`);
    await settled(app, id, "delivered");
    const [cb] = engine.received;
    expect(cb!.headers.authorization).toBe(`Basic ${Buffer.from("engine@ops:s3cr:t").toString("base64")}`);
    expect((await attemptsOf(app, id)).map((a) => a.callback_host)).toEqual([engine.host]);
  });

  it("a wait with no callback has none; an unknown wait is 404", async () => {
    const { body: wait } = await openWait(app, "listed-none", { signal: "approval" });
    await intake(app, "listed-none", "approval", "{}");
    expect(await body(app.api(`/waits/${wait.id}/deliveries`))).toEqual({ items: [], next_cursor: null });
    await expectProblem(await app.api("/waits/wt_unknown/deliveries"), 404);
  });
});

describe("GET /deliveries: failing deliveries across waits", () => {
  it("lists failed deliveries by status and host, oldest last attempt first, page by page", async () => {
    const down = await receiver(() => 500);
    const other = await receiver(() => 503);
    const refusing = await receiver(() => 404);
    const toDown = [];
    for (let i = 0; i < 3; i++) toDown.push(await resolvedWait(app, `failing-down-${i}`, down.url));
    const toOther = [await resolvedWait(app, "failing-other-0", other.url), await resolvedWait(app, "failing-other-1", other.url)];
    const rejected = await resolvedWait(app, "failing-rejected", refusing.url);
    for (const id of [...toDown, ...toOther, rejected]) await settled(app, id, "failed");

    const { items, pages } = await readAll<Failing>(app, `/deliveries?status=failed&callback_host=${down.host}`, 2);
    expect(pages).toBe(2);
    expect(new Set(items.map((d) => d.wait_id))).toEqual(new Set(toDown));
    expect(items).toHaveLength(3);
    for (const d of items) {
      expect(d).toEqual({
        kind: "callback",
        wait_id: expect.any(String),
        run_id: expect.stringMatching(/^failing-down-/),
        signal: "approval",
        status: "failed",
        callback_host: down.host,
        attempts: MAX_ATTEMPTS,
        last_error: "HTTP 500",
        last_status_code: 500,
        last_attempt_at: expect.any(String),
      });
    }
    const times = items.map((d) => Date.parse(d.last_attempt_at));
    expect(times).toEqual([...times].sort((a, b) => a - b));

    // The host is compared case-insensitively (URLs lower-case it); another host's are not listed.
    const upper = await readAll<Failing>(app, `/deliveries?status=failed&callback_host=${other.host.toUpperCase()}`, 500);
    expect(new Set(upper.items.map((d) => d.wait_id))).toEqual(new Set(toOther));
    // A 4xx gives up at once: one attempt.
    const byRefusal = (await readAll<Failing>(app, `/deliveries?callback_host=${refusing.host}`, 500)).items;
    expect(byRefusal).toEqual([expect.objectContaining({ wait_id: rejected, status: "failed", attempts: 1, last_status_code: 404, last_error: "HTTP 404" })]);
    // Across hosts: all six among the failed, none of them among the pending.
    const failed = new Set((await readAll<Failing>(app, "/deliveries?status=failed", 1)).items.map((d) => d.wait_id));
    for (const id of [...toDown, ...toOther, rejected]) expect(failed.has(id), id).toBe(true);
    const pending = (await readAll<Failing>(app, "/deliveries?status=pending", 500)).items;
    expect(pending.filter((d) => failed.has(d.wait_id))).toEqual([]);
  });

  it("a delivered wait is not listed, nor one whose retry then delivered", async () => {
    const flaky = await receiver((n) => (n === 1 ? 500 : 204));
    const id = await resolvedWait(app, "failing-recovered", flaky.url);
    await settled(app, id, "delivered");
    expect((await readAll<Failing>(app, `/deliveries?callback_host=${flaky.host}`, 500)).items).toEqual([]);
  });

  it("a pending retry is listed as pending; redelivered after failing, too", async () => {
    const down = await receiver(() => 500);
    const id = await resolvedWait(slowApp, "pending-listed", down.url);
    await waitFor("the first attempt recorded", () => getWait(slowApp, id), { until: (w) => w.delivery.attempts === 1 });
    expect((await readAll<Failing>(slowApp, `/deliveries?status=pending&callback_host=${down.host}`, 500)).items).toEqual([
      expect.objectContaining({ wait_id: id, status: "pending", attempts: 1, last_status_code: 500 }),
    ]);
    expect((await readAll<Failing>(slowApp, `/deliveries?status=failed&callback_host=${down.host}`, 500)).items).toEqual([]);
  });

  it("bad parameters are 400 problems and change nothing", async () => {
    for (const query of ["status=delivered", "status=", "callback_host=a%20b", "callback_host=" + "h".repeat(301), "limit=0", "limit=501", "cursor=x", "cursor=" + "a".repeat(401)]) {
      const problem = await expectProblem(await app.api(`/deliveries?${query}`), 400);
      expect(problem.validation_errors?.length, query).toBeGreaterThan(0);
    }
    // A well-formed cursor of another list (a wait's position) is not one of these.
    await expectProblem(await app.api(`/deliveries?cursor=${encodeCursor({ at: new Date(), id: "wt_abc" })}`), 400);
    await expectProblem(await app.api(`/waits/wt_unknown/deliveries?cursor=x`), 400);
    await expectProblem(await app.api(`/waits/${"x".repeat(101)}/deliveries`), 400);
    expect((await fetch(`${app.baseUrl}/deliveries`)).status).toBe(401);
    expect((await fetch(`${app.baseUrl}/waits/wt_x/deliveries`)).status).toBe(401);
  });
});

describe("GET /waits?delivery=", () => {
  it("filters by the callback's delivery status", async () => {
    const ok = await receiver(() => 204);
    const refusing = await receiver(() => 410);
    const run = "delivery-filter";
    const delivered = await resolvedWait(app, run, ok.url);
    const failed = await resolvedWait(app, run, refusing.url);
    const { body: bare } = await openWait(app, run, { signal: "approval" });
    await intake(app, run, "approval", "{}");
    await settled(app, delivered, "delivered");
    await settled(app, failed, "failed");

    const ids = async (delivery: string) => (await readAll<{ id: string }>(app, `/waits?run_id=${run}&delivery=${delivery}`, 500)).items.map((w) => w.id);
    expect(await ids("delivered")).toEqual([delivered]);
    expect(await ids("failed")).toEqual([failed]);
    expect(await ids("none")).toEqual([bare.id]);
    expect(await ids("pending")).toEqual([]);
    await expectProblem(await app.api(`/waits?run_id=${run}&delivery=sent`), 400);
  });
});

describe("POST /waits/{id}/redeliver keeps the history", () => {
  it("while a retry is pending it sends now, and the attempt numbers go on", async () => {
    let answer = 500;
    const engine = await receiver(() => answer);
    const id = await resolvedWait(slowApp, "redeliver-pending", engine.url);
    await waitFor("the first attempt recorded", () => getWait(slowApp, id), { until: (w) => w.delivery.attempts === 1 });
    expect((await getWait(slowApp, id)).delivery.status).toBe("pending"); // the retry is an hour away

    answer = 204;
    const res = await slowApp.api(`/waits/${id}/redeliver`, { method: "POST" });
    expect(res.status).toBe(202);
    expect((await body(res)).delivery).toEqual({ status: "pending", attempts: 1, last_error: "HTTP 500" });
    const [first, second] = await engine.waitFor(2);
    expect(second!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);
    const wait = await settled(slowApp, id, "delivered");
    expect(wait.delivery).toEqual({ status: "delivered", attempts: 2, last_error: null });
    expect((await attemptsOf(slowApp, id)).map((a) => [a.attempt, a.status_code, a.outcome])).toEqual([
      [1, 500, "retry"],
      [2, 204, "delivered"],
    ]);
    // The pending retry was that same job, run now: none is left waiting for the hour.
    const [{ jobs }] = await slowApp.database.sql<[{ jobs: number }]>`select count(*)::int as jobs from graphile_worker.jobs where key = ${"deliver:" + id}`;
    expect(jobs).toBe(0);
  });

  it("after it failed, a new round of attempts: numbers go on, nothing is removed", async () => {
    let answer = 500;
    const engine = await receiver(() => answer);
    const id = await resolvedWait(app, "redeliver-failed", engine.url);
    await settled(app, id, "failed");
    answer = 503; // still down: the new round makes MAX_ATTEMPTS attempts of its own
    expect((await app.api(`/waits/${id}/redeliver`, { method: "POST" })).status).toBe(202);
    await waitFor("the second round given up", () => getWait(app, id), { until: (w) => w.delivery.status === "failed" && w.delivery.attempts === 2 * MAX_ATTEMPTS });
    answer = 200;
    expect((await app.api(`/waits/${id}/redeliver`, { method: "POST" })).status).toBe(202);
    await settled(app, id, "delivered");
    const all = await attemptsOf(app, id);
    expect(all.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(all.map((a) => a.outcome)).toEqual(["retry", "retry", "failed", "retry", "retry", "failed", "delivered"]);
    expect(all.map((a) => a.status_code)).toEqual([500, 500, 500, 503, 503, 503, 200]);
  });

  it("two sends of the same attempt at once record it once", async () => {
    let release!: () => void;
    const bothIn = new Promise<number>((r) => (release = () => r(204)));
    const engine = await receiver((n) => (n === 1 ? 500 : n === 3 ? (release(), bothIn) : bothIn));
    const id = await resolvedWait(slowApp, "same-attempt-twice", engine.url);
    await waitFor("the first attempt recorded", () => getWait(slowApp, id), { until: (w) => w.delivery.attempts === 1 });
    // As a redelivery racing an attempt in flight, or a job run again after a crash: both saw one attempt.
    const verdicts = await Promise.all([deliverCallback(slowApp.deps, id), deliverCallback(slowApp.deps, id)]);
    expect(verdicts).toEqual(["delivered", "delivered"]);
    expect(engine.received).toHaveLength(3);
    expect((await attemptsOf(slowApp, id)).map((a) => [a.attempt, a.outcome])).toEqual([
      [1, "retry"],
      [2, "delivered"],
    ]);
    expect((await getWait(slowApp, id)).delivery).toEqual({ status: "delivered", attempts: 2, last_error: null });
  });
});

describe("a delivery that gives up", () => {
  it("logs one warning with the wait, the URL's host only and the last error", async () => {
    const engine = await receiver(() => 403);
    const secretUrl = engine.url.replace("http://", "http://engine-user:hunter2-password@") + "?token=query-secret";
    const id = await resolvedWait(app, "gives-up", secretUrl);
    await settled(app, id, "failed");
    const lines = await waitFor("the give-up warning", () => warnings.lines.filter((l) => l.waitId === id), { until: (l) => l.length > 0 });
    expect(lines).toEqual([
      expect.objectContaining({ level: 40, msg: "callback delivery gave up", waitId: id, callbackHost: engine.host, lastError: "HTTP 403", attempts: 1, reason: "rejected" }),
    ]);
    const text = JSON.stringify(warnings.lines);
    for (const secret of ["hunter2-password", "engine-user", "query-secret"]) expect(text).not.toContain(secret);
    // Listings show the endpoint, never the credentials either.
    expect(JSON.stringify(await attemptsOf(app, id))).not.toContain("hunter2");
  });

  it("as shipped: the process logs it and counts it on /metrics", async () => {
    const db = await createTestDatabase();
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-deliveries-"));
    try {
      const svc = await startService({
        DATABASE_URL: db.url,
        SIGNALBOX_DATA_DIR: dataDir,
        SIGNALBOX_LINK_KEYS: LINK_KEYS,
        SIGNALBOX_DELIVERY_MAX_ATTEMPTS: "2",
        SIGNALBOX_DELIVERY_BACKOFF_S: "0.05",
      });
      const engine = await receiver(() => 502);
      expect((await svc.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBeLessThan(300);
      const wait = (await (await svc.api("/runs/shipped/waits", { method: "POST", json: { signal: "approval", callback_url: engine.url } })).json()) as { id: string };
      expect((await fetch(`${svc.baseUrl}/signals/shipped/approval`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(202);
      const counted = await waitFor("the given-up counter on /metrics", async () =>
        (await (await fetch(`${svc.baseUrl}/metrics`)).text()).split("\n").find((l) => l.startsWith("signalbox_deliveries_given_up_total{")),
      );
      expect(counted).toBe('signalbox_deliveries_given_up_total{reason="attempts_exhausted"} 1');
      // The counter is raised just before the line is written: the line may reach us a moment later.
      const gaveUp = await waitFor("the give-up warning in the log", () => svc.logs().filter((l) => l.msg === "callback delivery gave up"), { until: (l) => l.length > 0 });
      expect(gaveUp).toEqual([expect.objectContaining({ level: 40, waitId: wait.id, callbackHost: engine.host, lastError: "HTTP 502", attempts: 2 })]);
    } finally {
      killServices();
      await db.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe("retention", () => {
  it("purges a wait's attempts with the wait, and keeps a recent wait's", async () => {
    const engine = await receiver((n) => (n === 1 ? 503 : 204));
    const old = await resolvedWait(app, "retention-old", engine.url);
    const recent = await resolvedWait(app, "retention-recent", engine.url);
    for (const id of [old, recent]) await settled(app, id, "delivered");
    const sql = app.database.sql;
    await sql`update signalbox.waits set created_at = created_at - interval '40 days', resolved_at = resolved_at - interval '40 days' where id = ${old}`;
    const countFor = async (id: string) => (await sql<[{ n: number }]>`select count(*)::int as n from signalbox.delivery_attempts where wait_id = ${id}`)[0].n;
    expect((await countFor(old)) + (await countFor(recent))).toBe(3);

    // The retention job may run meanwhile (it stands down for ours, or ours for it): purge until the old wait is gone.
    await waitFor(
      "the old wait purged",
      async () => {
        await purgeOldRecords({ ...app.deps, config: { ...app.config, SIGNALBOX_RETENTION_DAYS: 30 } }, { budgetMs: 60_000 });
        return (await sql`select 1 from signalbox.waits where id = ${old}`).length;
      },
      { until: (left) => left === 0 },
    );
    expect(await countFor(old)).toBe(0);
    expect(await countFor(recent)).toBeGreaterThan(0);
    await expectProblem(await app.api(`/waits/${old}/deliveries`), 404);
  });
});

describe("signalbox.record_delivery_attempt (no worker: the jobs it schedules stay put)", () => {
  const sql = useTestSql();
  const MAX = 4;
  const BACKOFF_S = 1.5;

  /** Records attempt n+1 of a pending wait as a retryable failure; returns its outcome and the delay of the job it scheduled. */
  async function failOnce(id: string, before: number) {
    const [row] = await sql()<Array<{ outcome: string; attempt: number; round_attempt: number }>>`
      select * from signalbox.record_delivery_attempt(${id}, ${before}, 'retry', 503, 'HTTP 503', 0, 'engine:9000', ${MAX}, ${BACKOFF_S})`;
    const [job] = await sql()<Array<{ delay_s: number }>>`
      select extract(epoch from j.run_at - a.started_at)::float8 as delay_s
      from graphile_worker.jobs j, signalbox.delivery_attempts a
      where j.key = ${"deliver:" + id} and a.wait_id = ${id} and a.attempt = ${before + 1}`;
    return { ...row!, delayS: job?.delay_s };
  }

  it("backs off as retryDelayS within a round, gives up at the round's last attempt, and a new round starts over", async () => {
    const id = "wt_recordfn";
    await sql()`insert into signalbox.runs (run_id) values ('r-fn')`; // a wait references its run
    await sql()`
      insert into signalbox.waits (id, run_id, signal, status, resolved_at, callback_url, resolution_event_id, delivery_status)
      values (${id}, 'r-fn', 'approval', 'cancelled', now(), 'http://engine:9000/resume', 7, 'pending')`;
    const seen = [];
    for (let before = 0; before < MAX; before++) seen.push(await failOnce(id, before));
    expect(seen.map((r) => [r.attempt, r.round_attempt, r.outcome])).toEqual([
      [1, 1, "retry"],
      [2, 2, "retry"],
      [3, 3, "retry"],
      [4, 4, "failed"],
    ]);
    // started_at is kept to the millisecond: the delay read back is within one of it.
    for (const r of seen.slice(0, 3)) expect(Math.abs(r.delayS! - retryDelayS(BACKOFF_S, r.round_attempt))).toBeLessThan(0.002);
    // A recorded attempt number is not recorded again (the compare-and-set).
    expect(await sql()`select * from signalbox.record_delivery_attempt(${id}, 2, 'delivered', 200, null, 0, 'engine:9000', ${MAX}, ${BACKOFF_S})`).toEqual([]);

    // A redelivery's round: the numbers go on, the count and the backoff start again.
    await sql()`update signalbox.waits set delivery_status = 'pending', delivery_round_start = delivery_attempts where id = ${id}`;
    const next = await failOnce(id, MAX);
    expect([next.attempt, next.round_attempt, next.outcome]).toEqual([MAX + 1, 1, "retry"]);
    expect(Math.abs(next.delayS! - retryDelayS(BACKOFF_S, 1))).toBeLessThan(0.002);
    const latest = await sql()<Array<{ attempt: number }>>`select attempt from signalbox.delivery_attempts where wait_id = ${id} and latest`;
    expect(latest).toEqual([{ attempt: MAX + 1 }]);
  });
});

describe("signalbox.record_delivery_attempts (a batch, set-based)", () => {
  const sql = useTestSql();
  const MAX = 2;
  const BACKOFF_S = 1.5;

  async function pendingWaits(prefix: string, n: number, attemptsBefore = 0): Promise<string[]> {
    await sql()`insert into signalbox.runs (run_id) values (${`r-${prefix}`}) on conflict do nothing`;
    const ids = Array.from({ length: n }, (_, i) => `wt_${prefix}_${i}`);
    for (const id of ids) {
      await sql()`
        insert into signalbox.waits (id, run_id, signal, status, resolved_at, callback_url, resolution_event_id, delivery_status, delivery_attempts)
        values (${id}, ${`r-${prefix}`}, 'approval', 'cancelled', now(), 'http://engine:9000/resume', 7, 'pending', ${attemptsBefore})`;
      for (let a = 1; a <= attemptsBefore; a++) {
        await sql()`
          insert into signalbox.delivery_attempts (wait_id, attempt, event_id, started_at, duration_ms, status_code, error, outcome, callback_host, latest)
          values (${id}, ${a}, 7, now(), 1, 503, 'HTTP 503', 'retry', 'engine:9000', ${a === attemptsBefore})`;
      }
    }
    return ids;
  }

  const item = (wait_id: string, attempts_before: number, verdict: string, status_code: number | null, reply: Record<string, boolean | string> | null = null) => ({
    wait_id,
    attempts_before,
    verdict,
    status_code,
    error: verdict === "delivered" ? null : `HTTP ${status_code}`,
    duration_ms: 3,
    callback_host: "engine:9000",
    reply,
  });

  /** What each wait and its attempts look like after recording (for comparing the batch with one by one). */
  async function state(ids: string[]) {
    const waits = await sql()`
      select id, delivery_status, delivery_attempts, delivery_last_error, reply, replied_at is not null as replied from signalbox.waits where id = any(${ids}) order by id`;
    const attempts = await sql()`
      select wait_id, attempt, status_code, error, outcome, latest, duration_ms from signalbox.delivery_attempts where wait_id = any(${ids}) order by wait_id, attempt`;
    const jobs = await sql()`select key, task_identifier from graphile_worker.jobs where key = any(${ids.map((id) => `deliver:${id}`)}) order by key`;
    return { waits, attempts, jobs: jobs.map((j) => ({ ...j, key: String(j.key).replace(/_(batch|single)_/, "_") })) };
  }

  it("records as record_delivery_attempt would one by one: delivered, retried, given up, rejected, a lost compare-and-set, a wait named twice, replies", async () => {
    const run = async (prefix: string, batch: boolean) => {
      const [a, b, c, d, e] = await pendingWaits(`${prefix}_fresh`, 5);
      const [f] = await pendingWaits(`${prefix}_later`, 1, 1);
      // A redelivery of a callback that replied already: its first reply stays.
      const [g] = await pendingWaits(`${prefix}_replied`, 1, 1);
      await sql()`update signalbox.waits set reply = '{"first": true}', replied_at = now() - interval '1 minute' where id = ${g!}`;
      const items = [
        item(a!, 0, "delivered", 204, { order: "shipped" }),
        item(b!, 0, "retry", 503, { not: "a reply" }),
        item(c!, 0, "failed", 404),
        item(d!, 1, "delivered", 200, { lost: true }), // lost: its attempt count is 0
        item(f!, 1, "retry", 503), // the round's last attempt: gives up
        item(e!, 0, "retry", 500),
        item(g!, 1, "delivered", 200, { second: true }),
      ];
      const results =
        batch ?
          await sql()`select n, outcome, attempt, round_attempt from signalbox.record_delivery_attempts(${sql().json(items)}::json, ${MAX}, ${BACKOFF_S}) order by n`
        : (
            await Promise.all(
              items.map(async (it, i) =>
                (
                  await sql()`select ${i + 1}::int as n, outcome, attempt, round_attempt from signalbox.record_delivery_attempt(
                    ${it.wait_id}, ${it.attempts_before}, ${it.verdict}, ${it.status_code}, ${it.error}, ${it.duration_ms}, ${it.callback_host}, ${MAX}, ${BACKOFF_S},
                    ${it.reply === null ? null : sql().json(it.reply)}::jsonb)`
                ).map((r) => ({ ...r })),
              ),
            )
          ).flat();
      return { results: results.map((r) => ({ ...r })), state: await state([a!, b!, c!, d!, e!, f!, g!]) };
    };
    const one = await run("single", false);
    const batch = await run("batch", true);
    expect(batch.results).toEqual(one.results);
    expect(batch.results.map((r) => r.outcome)).toEqual(["delivered", "retry", "failed", "failed", "retry", "delivered"]);
    const replies = Object.fromEntries(batch.state.waits.map((w) => [String(w.id).replace(/^wt_batch_/, ""), [w.reply, w.replied]]));
    expect(replies).toEqual({
      fresh_0: [{ order: "shipped" }, true],
      fresh_1: [null, false], // a retry's answer is no reply
      fresh_2: [null, false],
      fresh_3: [null, false], // its compare-and-set lost
      fresh_4: [null, false],
      later_0: [null, false],
      replied_0: [{ first: true }, true], // the first reply stays
    });
    const strip = (s: Awaited<ReturnType<typeof state>>) => JSON.parse(JSON.stringify(s).replace(/_(batch|single)_/g, "_"));
    expect(strip(batch.state)).toEqual(strip(one.state));

    // A wait named twice in one call: the first item is recorded, the second loses its compare-and-set.
    const [g] = await pendingWaits("twice", 1);
    const twice = await sql()`select n, outcome, attempt from signalbox.record_delivery_attempts(${sql().json([item(g!, 0, "retry", 503), item(g!, 0, "delivered", 200)])}::json, ${MAX}, ${BACKOFF_S})`;
    expect(twice.map((r) => ({ ...r }))).toEqual([{ n: 1, outcome: "retry", attempt: 1 }]);
  });
});
