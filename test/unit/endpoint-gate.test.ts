import { describe, expect, it } from "vitest";
import { EndpointGate, type Admission } from "../../src/delivery/endpoint-gate.ts";

// The per-endpoint gate of callback delivery, on a clock the test moves.

function gate(opts: { perEndpoint?: number; failures?: number; maxQueueMs?: number; maxQueued?: number; maxQueuedBytes?: number } = {}) {
  let t = 1_000_000;
  const events: string[] = [];
  const g = new EndpointGate({
    perEndpoint: opts.perEndpoint ?? 2,
    failuresToBackOff: opts.failures ?? 3,
    backoffBaseS: 1,
    stuckMs: 100,
    ...(opts.maxQueueMs ? { maxQueueMs: opts.maxQueueMs } : {}),
    ...(opts.maxQueued ? { maxQueued: opts.maxQueued } : {}),
    ...(opts.maxQueuedBytes ? { maxQueuedBytes: opts.maxQueuedBytes } : {}),
    now: () => t,
    onBackOff: (host, failures, until) => events.push(`backoff ${host} ${failures} ${(until - t) / 1000}s`),
    onRecover: (host) => events.push(`recover ${host}`),
  });
  return { g, events, advance: (ms: number) => (t += ms) };
}

const send = (a: Admission) => {
  if (a.kind !== "send") throw new Error(`expected send, got ${a.kind}`);
  return a;
};

describe("EndpointGate", () => {
  it("caps requests in flight per endpoint; other endpoints are not counted against it", async () => {
    const { g, advance } = gate({ perEndpoint: 2 });
    send(await g.admit("a:1"));
    send(await g.admit("a:1"));
    send(await g.admit("b:1"));
    advance(150); // a's requests are now older than stuckMs: a is stuck, not waited for
    expect((await g.admit("a:1")).kind).toBe("busy");
    send(await g.admit("b:1"));
  });

  it("a waiter gets the slot a young request frees", async () => {
    const { g } = gate({ perEndpoint: 1 });
    const first = send(await g.admit("a:1"));
    const second = g.admit("a:1");
    first.release(false);
    expect((await second).kind).toBe("send");
  });

  it("a request sent before a backoff that fails after it ended (a hung one, at its limit) begins no new backoff", async () => {
    const { g, events, advance } = gate({ perEndpoint: 5, failures: 3 });
    const sent = [];
    for (let i = 0; i < 5; i++) sent.push(send(await g.admit("a:1")));
    advance(10);
    for (const r of sent.slice(0, 3)) r.release(true);
    expect(events).toEqual(["backoff a:1 3 1s"]);
    advance(1_001);
    for (const r of sent.slice(3)) r.release(true); // stragglers of before the backoff
    expect(events).toEqual(["backoff a:1 3 1s"]);
    expect(g.isBackedOff("a:1")).toBe(false);
    send(await g.admit("a:1")).release(true); // a probe sent since: that one counts
    expect(events.at(-1)).toBe("backoff a:1 6 2s");
  });

  it("keeps no state without bound for hosts that failed once and were never called again", async () => {
    const { g } = gate({ perEndpoint: 1, failures: 3 });
    for (let i = 0; i < 5_000; i++) send(await g.admit(`host-${i}:1`)).release(true);
    expect(g.tracked()).toBeLessThanOrEqual(1_000);
  });

  it("turns a waiter away once it has waited its share while the endpoint answers (slowly): busy, back when the queue ahead has gone", async () => {
    const { g, advance } = gate({ perEndpoint: 1 });
    const first = send(await g.admit("a:1"));
    advance(40);
    first.release(false); // answered in 40 ms
    const second = send(await g.admit("a:1"));
    const waiting = g.admit("a:1");
    advance(95); // second is young (not stuck), but the waiter has waited 95 % of stuckMs
    const turned = await waiting;
    expect(turned).toMatchObject({ kind: "busy" });
    expect((turned as { retryInMs: number }).retryInMs).toBeGreaterThanOrEqual(1_000);
    second.release(false);
    send(await g.admit("a:1")); // and the endpoint takes the next one as before
  });

  it("backs an endpoint off after failures in a row, probes one at a time after, and recovers on an answer", async () => {
    const { g, events, advance } = gate({ perEndpoint: 5, failures: 3 });
    for (let i = 0; i < 2; i++) send(await g.admit("a:1")).release(true);
    send(await g.admit("a:1")).release(false); // an answer resets the count
    for (let i = 0; i < 3; i++) send(await g.admit("a:1")).release(true);
    expect(events).toEqual(["backoff a:1 3 1s"]);
    expect(g.isBackedOff("a:1")).toBe(true);
    expect(g.backedOff()).toBe(1);
    expect(await g.admit("a:1")).toMatchObject({ kind: "backed_off", failures: 3 });

    advance(1_001);
    const probe = send(await g.admit("a:1"));
    expect((await g.admit("a:1")).kind).toBe("busy"); // one probe at a time
    probe.release(true); // the probe failed: backed off again, twice as long
    expect(events.at(-1)).toBe("backoff a:1 4 2s");
    advance(2_001);
    send(await g.admit("a:1")).release(false);
    expect(events.at(-1)).toBe("recover a:1");
    expect(g.backedOff()).toBe(0);
    send(await g.admit("a:1"));
    send(await g.admit("a:1")); // the full cap again
  });
});

describe("EndpointGate, queued admissions (a caller that holds no job slot while it waits)", () => {
  /** An endpoint answering one request at a time, each in 40 ms. */
  async function answering(g: EndpointGate, advance: (ms: number) => void) {
    const first = send(await g.admit("a:1"));
    advance(40);
    first.release(false);
    return send(await g.admit("a:1"));
  }

  it("wait their turn past a job's share while the endpoint answers, in order", async () => {
    const { g, advance } = gate({ perEndpoint: 1 });
    let inFlight = await answering(g, advance);
    const queued = [0, 1, 2].map(() => g.admit("a:1", { queue: true }));
    for (const next of queued) {
      advance(40); // each answered in 40 ms: never stuck (100 ms), though the last waits 120 ms
      inFlight.release(false);
      inFlight = send(await next);
    }
    // A job's admission that waited as long would have been turned away.
    const held = g.admit("a:1");
    advance(95);
    expect((await held).kind).toBe("busy");
  });

  it("are turned away at once when the endpoint would take longer than maxQueueMs to reach them", async () => {
    const { g, advance } = gate({ perEndpoint: 1, maxQueueMs: 100 });
    const inFlight = await answering(g, advance);
    const queued = [g.admit("a:1", { queue: true }), g.admit("a:1", { queue: true })]; // 40 and 80 ms away
    expect(await g.admit("a:1", { queue: true })).toMatchObject({ kind: "busy" }); // 120 ms away
    inFlight.release(false);
    send(await queued[0]!).release(false);
    send(await queued[1]!);
  });

  it("are not turned away for a stall that held up a few answers while the endpoint kept its pace", async () => {
    const { g, advance } = gate({ perEndpoint: 2, maxQueueMs: 100 });
    // A second of answers, each in 2 ms: about 500 a second.
    for (let i = 0; i < 500; i++) {
      const a = send(await g.admit("a:1"));
      advance(2);
      a.release(false);
    }
    // Two answers held up 300 ms (a stall on our side): their time lifts the average answer to
    // about 60 ms, at which 10 queued would take over 300 ms; the pace says about 50.
    const held = [send(await g.admit("a:1")), send(await g.admit("a:1"))];
    advance(300);
    for (const a of held) a.release(false);
    const inFlight = [send(await g.admit("a:1")), send(await g.admit("a:1"))];
    const queued = Array.from({ length: 10 }, () => g.admit("a:1", { queue: true }));
    // None was turned away: each gets a slot as the ones ahead come back.
    let freed = inFlight;
    for (let i = 0; i < queued.length; i += 2) {
      advance(2);
      for (const a of freed) a.release(false);
      freed = [send(await queued[i]!), send(await queued[i + 1]!)];
    }
  });

  it("are bounded across all endpoints (maxQueued)", async () => {
    const { g, advance } = gate({ perEndpoint: 1, maxQueued: 2 });
    const a = await answering(g, advance);
    const b = send(await g.admit("b:1"));
    const queued = [g.admit("a:1", { queue: true }), g.admit("b:1", { queue: true })];
    expect(await g.admit("b:1", { queue: true })).toMatchObject({ kind: "busy" });
    a.release(false);
    b.release(false);
    for (const q of queued) send(await q);
  });

  it("wait behind a request that hangs while the endpoint's others come back: slow, not stuck", async () => {
    const { g, advance } = gate({ perEndpoint: 2 });
    send(await g.admit("a:1")); // hangs
    let other = send(await g.admit("a:1"));
    for (let i = 0; i < 3; i++) {
      const queued = g.admit("a:1", { queue: true });
      advance(60); // the hung one grows older than stuckMs (100 ms); the other comes back every 60 ms
      other.release(false);
      other = send(await queued);
    }
    advance(150); // nothing came back for longer than stuckMs: now it is stuck
    expect(await g.admit("a:1", { queue: true })).toMatchObject({ kind: "busy" });
  });

  it("are bounded by the bytes they hold, and one host takes half of them at most", async () => {
    const { g, advance } = gate({ perEndpoint: 1, maxQueued: 4, maxQueuedBytes: 1_000 });
    const a = await answering(g, advance);
    const queued = [g.admit("a:1", { queue: true, bytes: 600 }), g.admit("a:1", { queue: true, bytes: 100 })];
    expect(await g.admit("a:1", { queue: true, bytes: 1 })).toMatchObject({ kind: "busy" }); // a holds half of maxQueued
    const b = send(await g.admit("b:1"));
    expect(await g.admit("b:1", { queue: true, bytes: 400 })).toMatchObject({ kind: "busy" }); // 1,100 bytes in all
    const fits = g.admit("b:1", { queue: true, bytes: 300 });
    b.release(false);
    send(await fits);
    a.release(false);
    for (const q of queued) send(await q).release(false);
  });

  it("are turned away at the `until` their caller sets while they wait", async () => {
    const { g, advance } = gate({ perEndpoint: 1 });
    const inFlight = await answering(g, advance);
    const ticket: { queue: true; until?: number } = { queue: true };
    const queued = g.admit("a:1", ticket);
    ticket.until = 0; // the caller's limit, already passed: it is turned away when it looks again
    advance(60);
    inFlight.release(false); // its turn: it does not take the slot, and the next in line gets it
    expect(await queued).toMatchObject({ kind: "busy" });
    send(await g.admit("a:1"));
  });

  it("come after a job's admission waiting at the same endpoint, and newcomers after both", async () => {
    const { g, advance } = gate({ perEndpoint: 1 });
    let inFlight = await answering(g, advance);
    const order: string[] = [];
    const queued = g.admit("a:1", { queue: true }).then((a) => (order.push("queued"), a));
    const held = g.admit("a:1").then((a) => (order.push("job"), a));
    advance(10);
    inFlight.release(false);
    inFlight = send(await held);
    advance(10);
    inFlight.release(false);
    send(await queued);
    expect(order).toEqual(["job", "queued"]);
  });

  it("are all turned away when the gate closes", async () => {
    const { g, advance } = gate({ perEndpoint: 1 });
    await answering(g, advance);
    const queued = [g.admit("a:1", { queue: true }), g.admit("a:1", { queue: true })];
    g.close();
    for (const q of queued) expect(await q).toMatchObject({ kind: "busy" });
    expect(await g.admit("b:1", { queue: true })).toMatchObject({ kind: "busy" });
  });

  it("are turned away once the endpoint's requests look stuck", async () => {
    const { g, advance } = gate({ perEndpoint: 1 });
    await answering(g, advance);
    const queued = g.admit("a:1", { queue: true });
    advance(150); // the request in flight is older than stuckMs; the gate looks again on its timer
    expect(await queued).toMatchObject({ kind: "busy" });
  });
});
