import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// Many senders at once, one run: the run's row lock orders them, so exactly one wins a wait,
// an idempotency key is honoured exactly once, and sequence numbers have no gaps.

const N = 40;
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false, env: { SIGNALBOX_DB_POOL_SIZE: "10" } });
  for (const [name, ttl] of [["approval", 0], ["buffered", 60]] as const) {
    const res = await app.api(`/signal-types/${name}`, { method: "PUT", json: { auth: { scheme: "none" }, buffer_ttl_s: ttl } });
    expect(res.status).toBe(201);
  }
});
afterAll(async () => {
  await app?.close();
});

interface Answer {
  status: number;
  body: { outcome: string; signal_id?: string; sequence?: number; wait_id?: string | null; run_id?: string };
}

async function send(run: string, signal: string, body: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${app.baseUrl}/signals/${run}/${signal}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: res.status, body: (await res.json()) as Answer["body"] };
}

/** N requests released together: all are in flight before any is answered. */
const together = (n: number, one: (i: number) => Promise<Answer>) => Promise.all(Array.from({ length: n }, (_, i) => one(i)));

async function openWaitId(run: string, signal: string): Promise<string> {
  return (await openWait(app, run, { signal }, 201)).body.id;
}

async function signalLog(run: string) {
  const res = await app.api(`/runs/${run}/signals?limit=500`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: Array<{ id: string; outcome: string; sequence: number | null; wait_id: string | null }> }).items;
}

const count = (answers: Answer[], outcome: string) => answers.filter((a) => a.body.outcome === outcome).length;

describe("40 concurrent senders to one wait", () => {
  it("exactly one is received, the rest rejected_not_waiting (buffer_ttl_s 0); rejections take no sequence", async () => {
    const waitId = await openWaitId("senders", "approval");
    const answers = await together(N, (i) => send("senders", "approval", JSON.stringify({ sender: i })));

    expect(count(answers, "received")).toBe(1);
    expect(count(answers, "rejected_not_waiting")).toBe(N - 1);
    const winner = answers.find((a) => a.body.outcome === "received")!;
    expect(winner).toMatchObject({ status: 202, body: { sequence: 1, wait_id: waitId } });
    for (const a of answers.filter((x) => x !== winner)) expect(a.status).toBe(409);

    const wait = await (await app.api(`/waits/${waitId}`)).json();
    expect(wait).toMatchObject({ status: "received", result: { signal_id: winner.body.signal_id, sequence: 1 } });

    const log = await signalLog("senders");
    expect(log).toHaveLength(N);
    expect(log.filter((s) => s.sequence !== null).map((s) => s.id)).toEqual([winner.body.signal_id]);

    // Gapless: the next accepted signal of the run is number 2, whatever was rejected between.
    await openWaitId("senders", "approval");
    expect((await send("senders", "approval", "{}")).body).toMatchObject({ outcome: "received", sequence: 2 });
  });

  it("with buffering, one is received and 39 buffered, numbered 1..40 with no gap or repeat", async () => {
    const waitId = await openWaitId("senders-buffered", "buffered");
    const answers = await together(N, (i) => send("senders-buffered", "buffered", JSON.stringify({ sender: i })));

    expect(count(answers, "received")).toBe(1);
    expect(count(answers, "buffered")).toBe(N - 1);
    expect(answers.every((a) => a.status === 202)).toBe(true);
    // The run lock hands the wait to whoever took it first, so the received one is number 1.
    expect(answers.find((a) => a.body.outcome === "received")!.body).toMatchObject({ sequence: 1, wait_id: waitId });
    const sequences = answers.map((a) => a.body.sequence!).sort((a, b) => a - b);
    expect(sequences).toEqual(Array.from({ length: N }, (_, i) => i + 1));

    const log = await signalLog("senders-buffered");
    expect(log.map((s) => s.sequence).sort((a, b) => a! - b!)).toEqual(sequences);
  });
});

describe("40 concurrent retries of one Idempotency-Key with the same payload", () => {
  it("one signal is accepted (received), 39 are duplicates repeating its answer; the log holds it once", async () => {
    const waitId = await openWaitId("retries", "approval");
    const answers = await together(N, () => send("retries", "approval", '{"approved":true}', { "idempotency-key": "order-17-approval" }));

    expect(count(answers, "received")).toBe(1);
    expect(count(answers, "duplicate")).toBe(N - 1);
    const first = answers.find((a) => a.body.outcome === "received")!;
    expect(first).toMatchObject({ status: 202, body: { sequence: 1, wait_id: waitId } });
    for (const a of answers.filter((x) => x !== first)) {
      expect(a).toEqual({ status: 200, body: { outcome: "duplicate", signal_id: first.body.signal_id, sequence: 1, wait_id: waitId, run_id: first.body.run_id } });
    }

    const log = await signalLog("retries");
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ id: first.body.signal_id, outcome: "received", sequence: 1, wait_id: waitId });
    const events = ((await (await app.api("/runs/retries/events")).json()) as { items: Array<{ type: string }> }).items;
    expect(events.filter((e) => e.type === "signal.received")).toHaveLength(1);
  });

  it("on a fresh run with no wait: one buffered, 39 duplicates, one buffered signal for the next wait", async () => {
    const answers = await together(N, () => send("retries-fresh", "buffered", '{"n":1}', { "idempotency-key": "k-1" }));

    expect(count(answers, "buffered")).toBe(1);
    expect(count(answers, "duplicate")).toBe(N - 1);
    const first = answers.find((a) => a.body.outcome === "buffered")!;
    expect(new Set(answers.map((a) => a.body.signal_id))).toEqual(new Set([first.body.signal_id]));
    expect(await signalLog("retries-fresh")).toEqual([expect.objectContaining({ id: first.body.signal_id, outcome: "buffered", sequence: 1 })]);

    // The buffered signal is consumed once; the next wait after it finds nothing.
    const res = await app.api("/runs/retries-fresh/waits", { method: "POST", json: { signal: "buffered" } });
    expect(await res.json()).toMatchObject({ status: "received", result: { signal_id: first.body.signal_id } });
    const next = await app.api("/runs/retries-fresh/waits", { method: "POST", json: { signal: "buffered" } });
    expect(await next.json()).toMatchObject({ status: "waiting" });
  });
});
