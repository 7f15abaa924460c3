import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setDebugHook } from "../../src/core/debug-point.ts";
import { declareType, openWait } from "../helpers/http.ts";
import { settledWait } from "../helpers/race-gates.ts";
import { createTestDatabase, startTestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// A process stopping (SIGTERM) while a job of its runs on past the runner's stop limit: the job
// is released for another process, not left locked for graphile-worker's 4 hours.

let db: Awaited<ReturnType<typeof createTestDatabase>>;
let sql: postgres.Sql;
beforeAll(async () => {
  db = await createTestDatabase();
  sql = postgres(db.url, { max: 1, onnotice: () => {} });
});
afterAll(async () => {
  setDebugHook("expire-wait:read", undefined);
  await sql?.end();
  await db?.drop();
});

describe("stopping with a job still running", () => {
  it("releases the job it could not finish; the next process times the wait out", { timeout: 30_000 }, async () => {
    const first = await startTestApp({ databaseUrl: db.url });
    await declareType(first, "approval", { auth: { scheme: "none" } });
    const wait = (await openWait(first, "stop-running", { signal: "approval", timeout_s: 1 }, 201)).body as { id: string };
    setDebugHook("expire-wait:read", (id) => (id === wait.id ? new Promise<void>(() => {}) : undefined)); // its timeout job never ends
    const job = () => sql<{ locked_by: string | null }[]>`select locked_by from graphile_worker.jobs where key = ${`expire:${wait.id}`}`.then((r) => r[0]);
    await waitFor("its timeout job running", job, { until: (j) => typeof j?.locked_by === "string", timeoutMs: 10_000 });

    await first.close(); // the runner's stop gives up on the job after its limit
    expect(await job()).toMatchObject({ locked_by: null });

    setDebugHook("expire-wait:read", undefined);
    const next = await startTestApp({ databaseUrl: db.url });
    try {
      expect((await settledWait(next, wait.id, 10)).status).toBe("timed_out");
    } finally {
      await next.close();
    }
  });
});
