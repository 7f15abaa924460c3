import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openWait } from "../helpers/http.ts";
import { holdInSql, lockWaiters, releaseAllGates } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// A wait and a signal for the same run, committed at the same moment, must find each other:
// either the signal matches the open wait, or it is buffered and the wait consumes it. Both
// take the run's row lock first, so "neither saw the other" cannot happen.

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  const res = await app.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" }, buffer_ttl_s: 60 } });
  expect(res.status).toBe(201);
});
afterEach(() => releaseAllGates());
afterAll(async () => {
  releaseAllGates();
  await app?.close();
});

type Json = Record<string, any>;

const openApprovalWait = (run: string): Promise<{ status: number; body: Json }> => openWait(app, run, { signal: "approval" });

async function sendSignal(run: string, i: number): Promise<{ status: number; body: Json }> {
  const res = await fetch(`${app.baseUrl}/signals/${run}/approval`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ i }) });
  return { status: res.status, body: (await res.json()) as Json };
}

async function unconsumedBuffered(): Promise<number> {
  const [row] = await app.database.sql<{ n: number }[]>`
    select count(*)::int as n from signalbox.signals where outcome = 'buffered' and wait_id is null`;
  return row!.n;
}

describe("a wait and a buffered signal created at the same moment", () => {
  it("never miss each other (50 fresh runs, wait and signal sent together)", async () => {
    const orders = { signalMatchedWait: 0, waitConsumedBuffer: 0 };
    for (let i = 0; i < 50; i++) {
      const run = `meet-${i}`;
      // Alternate which request is sent first; both are in flight before either is answered.
      const [opened, sent] =
        i % 2 === 0
          ? await Promise.all([openApprovalWait(run), sendSignal(run, i)])
          : await Promise.all([sendSignal(run, i), openApprovalWait(run)]).then(([s, w]) => [w, s] as const);

      expect(opened.status).toBe(201);
      expect(sent.status).toBe(202);
      const wait = (await (await app.api(`/waits/${opened.body.id}`)).json()) as Json;
      expect(wait.status, `iteration ${i}: ${JSON.stringify({ opened: opened.body, sent: sent.body })}`).toBe("received");
      expect(wait.result).toMatchObject({ signal_id: sent.body.signal_id, sequence: 1, payload: { i } });
      if (sent.body.outcome === "received") {
        expect(sent.body.wait_id).toBe(opened.body.id);
        orders.signalMatchedWait++;
      } else {
        expect(sent.body.outcome).toBe("buffered");
        expect(opened.body.status).toBe("received"); // consumed at once, in the wait's own transaction
        orders.waitConsumedBuffer++;
      }
    }
    expect(await unconsumedBuffered()).toBe(0);
    console.info(`wait vs buffered signal: ${orders.signalMatchedWait} matched an open wait, ${orders.waitConsumedBuffer} buffered then consumed by the wait`);
  });

  it("a wait opened while the signal holds the run lock waits for it, then consumes the buffered signal", async () => {
    // The run exists already (an earlier, cancelled wait), so only the run's row lock can order the two.
    const earlier = await openApprovalWait("meet-held");
    expect((await app.api(`/waits/${earlier.body.id}/cancel`, { method: "POST" })).status).toBe(200);
    const signal = await holdInSql(app, "accept-signals:locked", "meet-held"); // inside accept_signals, run lock taken
    const sending = sendSignal("meet-held", 0);
    expect(await signal.reached).toBe("meet-held");

    const opening = openApprovalWait("meet-held");
    await lockWaiters(app.database.sql, 2); // the wait's transaction queues behind the signal's (which waits on the gate)
    signal.release();

    const [sent, opened] = await Promise.all([sending, opening]);
    expect(sent.body).toMatchObject({ outcome: "buffered", sequence: 1 });
    expect(opened).toMatchObject({ status: 201, body: { status: "received", result: { signal_id: sent.body.signal_id } } });
    expect(await unconsumedBuffered()).toBe(0);
  });
});
