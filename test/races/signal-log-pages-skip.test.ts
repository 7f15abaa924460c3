import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { lockWaiters } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// GET /runs/{run}/signals pages oldest first by (received_at, id), with a cursor. received_at was
// now(): the start of the transaction that accepted the signal, not when it took the run's lock
// or committed. A signal accepted by a transaction that began before the last row a client has
// paged past lands behind the client's cursor: the client never sees it, and the log lists it
// before signals that took smaller sequences.

let app: TestApp;
let sql: postgres.Sql;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  sql = postgres(app.databaseUrl, { max: 1, onnotice: () => {} });
  for (const [name, ttl] of [["plain", 0], ["buf", 600]] as const) {
    const res = await app.api(`/signal-types/${name}`, { method: "PUT", json: { auth: { scheme: "none" }, buffer_ttl_s: ttl } });
    expect(res.status).toBe(201);
  }
});
afterAll(async () => {
  await sql?.end();
  await app?.close();
});

const send = async (run: string, signal: string, body: unknown) => {
  const res = await fetch(`${app.baseUrl}/signals/${run}/${signal}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return (await res.json()) as { outcome: string; signal_id: string; sequence?: number };
};
type Item = { id: string; sequence: number | null; outcome: string };
const page = async (run: string, limit: number, cursor?: string) => {
  const res = await app.api(`/runs/${run}/signals?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
  expect(res.status).toBe(200);
  return (await res.json()) as { items: Item[]; next_cursor: string | null };
};

describe("paging a run's signal log while signals are accepted", () => {
  it("a client paging through the log sees every accepted signal", async () => {
    const run = "pages-skip";
    const dead = await send(run, "plain", { n: 0 }); // a dead letter to redrive
    expect(dead.outcome).toBe("rejected_not_waiting");
    const wait = await app.api(`/runs/${run}/waits`, { method: "POST", json: { signal: "plain" } });
    expect(wait.status).toBe(201);

    // The redrive's transaction begins now (its received_at), then waits for the dead letter's row.
    const locker = postgres(app.databaseUrl, { max: 1, onnotice: () => {} });
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let locked = false;
    const holding = locker.begin(async (tx) => {
      await tx`select 1 from signalbox.signals where id = ${dead.signal_id} for update`;
      locked = true;
      await released;
    });
    await waitFor("the dead letter's row", () => locked);
    const redrive = app.api("/signals/redrive", { method: "POST", json: { signal_id: dead.signal_id } });
    await lockWaiters(sql, 1);
    await new Promise((r) => setTimeout(r, 20));

    // Meanwhile two signals are accepted and committed (sequences 1 and 2).
    const first = await send(run, "buf", { n: 1 });
    const second = await send(run, "buf", { n: 2 });
    expect([first.sequence, second.sequence]).toEqual([1, 2]);

    // A client reads the first page: the dead letter and sequence 1, and a cursor.
    const p1 = await page(run, 2);
    expect(p1.items.map((s) => s.id)).toEqual([dead.signal_id, first.signal_id]);
    expect(p1.next_cursor).not.toBeNull();

    // The redrive commits: sequence 3, received by the open wait.
    release();
    await holding;
    await locker.end();
    const redriven = (await (await redrive).json()) as { outcome: string; signal_id: string; sequence: number };
    expect(redriven).toMatchObject({ outcome: "received", sequence: 3 });

    // The client reads on from its cursor.
    const seen = [...p1.items];
    for (let cursor = p1.next_cursor; cursor; ) {
      const p = await page(run, 2, cursor);
      seen.push(...p.items);
      cursor = p.next_cursor;
    }
    const full = (await page(run, 100)).items;
    expect.soft(seen.map((s) => s.sequence), "what the paging client saw").toEqual([null, 1, 2, 3]);
    expect.soft(full.map((s) => s.sequence), "the log, oldest first, in sequence order").toEqual([null, 1, 2, 3]);
  });
});
