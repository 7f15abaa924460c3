import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { heldOpen } from "../helpers/race-gates.ts";
import { openSse } from "../helpers/sse.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";

const auth = { authorization: `Bearer ${API_KEY}` };
let a: TestApp;
let b: TestApp;
beforeAll(async () => {
  // Two processes on one database (process B has no job worker: it only serves HTTP).
  a = await startTestApp({ env: { SIGNALBOX_SSE_HEARTBEAT_S: "0.2" } });
  b = await startTestApp({ databaseUrl: a.databaseUrl, worker: false, env: { SIGNALBOX_DB_POOL_SIZE: "10" } });
  await a.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } });
});
afterAll(async () => {
  await b.close();
  await a.close();
});

describe("SSE run history", () => {
  it("streams the history, then live events, with id lines and heartbeats; Last-Event-ID resumes without gaps or repeats", async () => {
    await a.api("/runs/sse-1/waits", { method: "POST", json: { signal: "approval" } });
    const stream = openSse(`${a.baseUrl}/runs/sse-1/events`, auth);
    await stream.until(() => stream.events.length >= 1);
    expect(stream.status).toBe(200);
    expect(stream.events[0]).toMatchObject({ event: "signal.waiting", id: expect.stringMatching(/^ev_\d+$/) });

    await fetch(`${a.baseUrl}/signals/sse-1/approval`, { method: "POST", body: '{"ok":true}' });
    await stream.until(() => stream.events.some((e) => e.event === "signal.received"));
    await stream.until(() => stream.comments.length > 0, 3000); // heartbeat while quiet
    const lastSeen = stream.events[stream.events.length - 1]!.id!;
    await stream.close();

    await a.api("/runs/sse-1/pause", { method: "POST", json: { reason: "later" } });
    await a.api("/runs/sse-1/resume", { method: "POST" });
    const resumed = openSse(`${a.baseUrl}/runs/sse-1/events`, { ...auth, "last-event-id": lastSeen });
    await resumed.until(() => resumed.events.length >= 2);
    // A marker after them: the stream is ordered, so once it arrives nothing before it can still come.
    await a.api("/runs/sse-1/pause", { method: "POST", json: { reason: "marker" } });
    await resumed.until(() => resumed.events.some((e) => JSON.parse(e.data).data?.reason === "marker"));
    expect(resumed.events.map((e) => e.event)).toEqual(["run.pausing", "run.resumed", "run.pausing"]);
    const all = [...stream.events, ...resumed.events].map((e) => Number(e.id!.slice(3)));
    expect(all).toEqual([...all].sort((x, y) => x - y));
    expect(new Set(all).size).toBe(all.length);
    await resumed.close();
  });

  it("?after= resumes too, and a JSON client still gets pages", async () => {
    const page = (await (await a.api("/runs/sse-1/events?limit=1")).json()) as any;
    expect(page.items).toHaveLength(1);
    const stream = openSse(`${a.baseUrl}/runs/sse-1/events?after=${page.items[0].id}`, auth);
    await stream.until(() => stream.events.length >= 3);
    expect(stream.events[0]!.event).toBe("signal.received");
    await stream.close();
  });

  it("an empty Last-Event-ID is no last event: the stream starts at ?after= or the beginning; a malformed one is a 400 naming the header", async () => {
    // An EventSource that has seen no id, or an `id:` line with no value, sends the header empty.
    const stream = openSse(`${a.baseUrl}/runs/sse-1/events`, { ...auth, "last-event-id": "" });
    await stream.until(() => stream.events.length >= 1);
    expect(stream.status).toBe(200);
    expect(stream.events[0]!.event).toBe("signal.waiting");
    await stream.close();

    const page = (await (await a.api("/runs/sse-1/events?limit=1")).json()) as any;
    const after = openSse(`${a.baseUrl}/runs/sse-1/events?after=${page.items[0].id}`, { ...auth, "last-event-id": "" });
    await after.until(() => after.events.length >= 1);
    expect(after.events[0]!.event).toBe("signal.received");
    await after.close();

    const bad = await fetch(`${a.baseUrl}/runs/sse-1/events`, { headers: { ...auth, accept: "text/event-stream", "last-event-id": "nope" } });
    expect(bad.status).toBe(400);
    const problem = (await bad.json()) as { detail: string; validation_errors?: Array<{ path: string }> };
    expect(problem.detail).toContain("Last-Event-ID");
    expect(problem.validation_errors ?? []).not.toContainEqual(expect.objectContaining({ path: "/after" }));
  });

  it("ends cleanly when the server shuts down", async () => {
    const c = await startTestApp({ databaseUrl: a.databaseUrl, worker: false });
    const stream = openSse(`${c.baseUrl}/runs/sse-shutdown/events`, auth);
    await heldOpen(c); // the stream is up and waiting for events
    const started = Date.now();
    const closing = c.close();
    await stream.done; // the response ended (no error, no hang)
    expect(Date.now() - started).toBeLessThan(1000);
    await closing;
  });

  it("an SSE client on process A sees an event caused on process B", async () => {
    await waitFor("the earlier tests' streams to be gone", () => a.changes.size, { until: (n) => n === 0 });
    const stream = openSse(`${a.baseUrl}/runs/cross-sse/events`, auth);
    await heldOpen(a); // registered on A: the event can only reach it by NOTIFY from B
    const caused = Date.now();
    await b.api("/runs/cross-sse/pause", { method: "POST", json: { reason: "from B" } });
    await stream.until(() => stream.events.some((e) => e.event === "run.pausing"));
    expect(Date.now() - caused).toBeLessThan(1000);
    await stream.close();
  });
});

describe("wake-ups across processes", () => {
  it("a pause on A holds a checkpoint on B; a resume on B releases it within 100 ms", async () => {
    await a.api("/runs/cross-1/pause", { method: "POST", json: { reason: "A says stop" } });
    let answeredAt = 0;
    const held = b.api("/runs/cross-1/checkpoints/step?wait_s=20", { method: "POST" }).then(async (r) => {
      answeredAt = performance.now();
      return r.json();
    });
    await heldOpen(b);
    expect(answeredAt).toBe(0);
    const resumeSent = performance.now();
    const resumed = await b.api("/runs/cross-1/resume", { method: "POST" });
    const committed = performance.now();
    expect(resumed.status).toBe(200);
    expect(await held).toEqual({ proceed: true });
    // From the resume's commit (its 200) to the held answer.
    expect(answeredAt - committed).toBeLessThan(100);
    expect(answeredAt - resumeSent).toBeLessThan(500);
  });

  it("a long-poll on B wakes when a signal lands on A", async () => {
    const wait = (await (await a.api("/runs/cross-2/waits", { method: "POST", json: { signal: "approval" } })).json()) as any;
    const held = b.api(`/waits/${wait.id}?wait_s=20`).then((r) => r.json());
    await heldOpen(b);
    const sent = performance.now();
    await fetch(`${a.baseUrl}/signals/cross-2/approval`, { method: "POST", body: "{}" });
    expect(((await held) as any).status).toBe("received");
    expect(performance.now() - sent).toBeLessThan(500);
  });

  it("1,000 held long-polls on one process with a pool of 10 connections: none holds a connection", async () => {
    const wait = (await (await a.api("/runs/many-polls/waits", { method: "POST", json: { signal: "approval" } })).json()) as any;
    const polls = Array.from({ length: 1000 }, () => fetch(`${b.baseUrl}/waits/${wait.id}?wait_s=30`, { headers: auth }).then((r) => r.json()));
    await heldOpen(b, 1000, 20_000);
    expect(b.changes.size).toBe(1000);
    // The pool still serves other requests at once while all 1,000 are held.
    const started = performance.now();
    expect((await b.api(`/runs/many-polls`)).status).toBe(200);
    expect(performance.now() - started).toBeLessThan(1000);
    await fetch(`${a.baseUrl}/signals/many-polls/approval`, { method: "POST", body: "{}" });
    const answers = (await Promise.all(polls)) as any[];
    expect(answers.every((w) => w.status === "received")).toBe(true);
  }, 60_000);
});
