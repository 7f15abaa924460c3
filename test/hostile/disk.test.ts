import { request, Agent } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { declareType, intake } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

const MiB = 2 ** 20;

describe("what rejected signals store", () => {
  let app: TestApp;
  const size = async () => Number((await app.database.sql<{ n: string }[]>`select pg_database_size(current_database()) as n`)[0]!.n);
  beforeAll(async () => {
    app = await startTestApp({ worker: false });
    await declareType(app, "open-door", { auth: { scheme: "none" } }); // no buffering: a signal with no wait is rejected
  });
  afterAll(() => app.close());

  it("a small payload is kept whole; a large one keeps its size and digest only", async () => {
    const small = JSON.stringify({ note: "x".repeat(1_000) });
    const large = JSON.stringify({ note: "x".repeat(10_000) });
    const a = await intake(app, "nobody-waits-1", "open-door", small);
    const b = await intake(app, "nobody-waits-2", "open-door", large);
    expect([a.body?.outcome, b.body?.outcome]).toEqual(["rejected_not_waiting", "rejected_not_waiting"]);
    const listed = (await (await app.api("/signals?outcome=rejected_not_waiting")).json()) as { items: Array<{ id: string; payload: unknown; payload_bytes: number | null }> };
    const byId = new Map(listed.items.map((s) => [s.id, s]));
    expect(byId.get(a.body!.signal_id)).toMatchObject({ payload: JSON.parse(small), payload_bytes: null });
    expect(byId.get(b.body!.signal_id)).toMatchObject({ payload: null, payload_bytes: large.length });
    const [row] = await app.database.sql<{ payload_hash: string }[]>`select payload_hash from signalbox.signals where id = ${b.body!.signal_id}`;
    expect(row!.payload_hash).toMatch(/^[A-Za-z0-9_-]{43}$/); // sha256, base64url
  });

  it("a 6-second flood of 1 MB payloads to runs that wait for nothing grows the database by under 20 MB", async () => {
    const before = await size();
    const body = JSON.stringify({ blob: "x".repeat(MiB - 100) });
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    const url = new URL(app.baseUrl);
    const send = (i: number) =>
      new Promise<number>((resolve) => {
        const req = request({ host: url.hostname, port: url.port, method: "POST", path: `/signals/flood-${i}/open-door`, agent, headers: { "content-type": "application/json" } }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        });
        req.on("error", () => resolve(0));
        req.end(body);
      });
    const until = Date.now() + 6_000;
    let sent = 0;
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (Date.now() < until) statuses.push(await send(sent++));
      }),
    );
    agent.destroy();
    const grownMiB = ((await size()) - before) / MiB;
    console.log(`disk flood: ${sent} requests of 1 MB in 6 s; database grew ${grownMiB.toFixed(1)} MiB`);
    expect(statuses.filter((s) => s === 409).length).toBeGreaterThan(100); // the flood did reach intake
    expect(grownMiB).toBeLessThan(20);
  }, 60_000);
});

describe("rejected signals per signal type", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ worker: false });
    await declareType(app, "capped", { auth: { scheme: "none" } });
    await declareType(app, "other", { auth: { scheme: "none" } });
  });
  afterAll(() => app.close());

  it("are kept up to the cap, the oldest purged first; other types and accepted signals are untouched", async () => {
    const { capRejectedSignals } = await import("../../src/signals/cap-rejections.ts");
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push((await intake(app, `cap-run-${i}`, "capped", `{"i":${i}}`)).body!.signal_id);
    await intake(app, "other-run", "other", "{}");
    await app.api("/runs/kept-run/waits", { method: "POST", json: { signal: "capped" } });
    const received = (await intake(app, "kept-run", "capped", "{}")).body!;
    expect(received.outcome).toBe("received");

    expect(await capRejectedSignals(app.deps.db, 10, 7)).toBe(7); // batches: at most 7 rows a call
    while ((await capRejectedSignals(app.deps.db, 10, 7)) > 0);
    const left = await app.database.sql<{ id: string }[]>`select id from signalbox.signals where signal = 'capped' and sequence is null order by received_at, id`;
    expect(left.map((r) => r.id).sort()).toEqual(ids.slice(-10).sort()); // the newest ten
    const others = await app.database.sql`select 1 from signalbox.signals where signal = 'other' or id = ${received.signal_id}`;
    expect(others).toHaveLength(2);
  });
});
