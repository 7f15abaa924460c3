import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { jsonAnswer, startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { declareType, intake, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// A sender held on one process for a reply that another process's deliveries runner records:
// the wake-up crosses processes by NOTIFY (record_delivery_attempts), and a lost NOTIFY costs
// at most the held request's one-second poll.

let a: TestApp; // API only: no worker, so it never delivers a callback itself
let b: TestApp; // API and worker on the same database: it delivers every callback
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
/** performance.now() when the engine answered each wait's callback. */
const answeredAt = new Map<string, number>();

beforeAll(async () => {
  a = await startTestApp({ worker: false });
  b = await startTestApp({ databaseUrl: a.databaseUrl });
  engine = await startCallbackReceiver((_n, cb) => {
    answeredAt.set(cb.json.wait.id, performance.now());
    return jsonAnswer({ resumed: cb.json.wait.id });
  });
  await declareType(a, "approval");
});
afterAll(async () => {
  await b?.close(); // shares a's database; a drops it
  await a?.close();
  await engine?.close();
});

describe("replies across processes", () => {
  it("a sender held on A gets the reply of a callback B delivered, woken by NOTIFY", async () => {
    const listener = postgres(a.databaseUrl, { max: 1, onnotice: () => {} });
    const notified: string[] = [];
    await listener.listen("signalbox_wait_changed", (ids) => notified.push(...ids.split(",")));
    // On A, only the NOTIFYs its LISTEN connection hears may wake a held request: no poll of
    // its own, no safety poll. A reply that still arrives came by NOTIFY from B.
    const { hold, wakeAll } = a.changes;
    a.changes.hold = ((...args: Parameters<typeof hold>) => {
      const [topics, waitMs, signal, read, done, opts] = args;
      return hold.call(a.changes, topics, waitMs, signal, read, done, { ...opts, pollMs: undefined });
    }) as typeof hold;
    a.changes.wakeAll = () => {};
    try {
      for (let i = 0; i < 5; i++) {
        const run = `two-replies-${i}`;
        const { body: wait } = await openWait(a, run, { signal: "approval", callback_url: engine.url }, 201);
        const res = await intake(a, run, "approval?wait_s=20", "{}");
        const answered = performance.now();
        expect(res.status, res.text).toBe(200);
        expect(res.body).toMatchObject({ outcome: "received", wait_id: wait.id, reply: { resumed: wait.id }, reply_pending: false, delivery_status: "delivered" });
        // From the engine's answer to A's: B recorded it and NOTIFYed, A read it.
        expect(answered - answeredAt.get(wait.id)!).toBeLessThan(1000);
        await waitFor("the NOTIFY of the settled delivery", () => notified.includes(wait.id));
      }
    } finally {
      a.changes.hold = hold;
      a.changes.wakeAll = wakeAll;
      await listener.end();
    }
  });

  it("a lost NOTIFY costs at most about a second: the held request reads again on its own", async () => {
    const hang = await startCallbackReceiver(() => new Promise<number>(() => {})); // B's attempt never ends
    try {
      const run = "two-replies-lost";
      const { body: wait } = await openWait(a, run, { signal: "approval", callback_url: hang.url }, 201);
      const sent = await intake(a, run, "approval", "{}");
      expect(sent.status).toBe(202);
      const id = sent.body!.signal_id as string;
      const held = a.api(`/signals/${id}?wait_s=20`);
      await waitFor("the request held", () => a.changes.held, { until: (n) => n >= 1 });
      // The reply recorded behind the feed's back: no NOTIFY is sent by a plain UPDATE.
      const sql = a.database.sql;
      await sql.begin(async (tx) => {
        await tx`update signalbox.waits set delivery_status = 'delivered', delivery_attempts = 1, reply = '{"quiet": true}', replied_at = now() where id = ${wait.id}`;
        await tx`update signalbox.signals set reply = '{"quiet": true}' where id = ${id}`;
      });
      const recorded = performance.now();
      const signal = await (await held).json();
      expect(performance.now() - recorded).toBeLessThan(1600);
      expect(signal).toMatchObject({ id, reply: { quiet: true }, reply_pending: false });
    } finally {
      hang.close().catch(() => {});
    }
  });
});
