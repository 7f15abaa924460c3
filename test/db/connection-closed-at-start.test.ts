import { afterAll, beforeAll, expect, it } from "vitest";
import { openDatabase } from "../../src/db/client.ts";
import { startFakePostgres } from "../helpers/fake-postgres.ts";

// A connection that Postgres closes just after its start-up, while postgres.js asks it for the
// array types (every new connection's first query): a Postgres restarting (pg_ctl restart -m
// fast) closes connections just opened. postgres.js's type lookup then failed with nothing
// listening, an unhandled rejection, and signalbox exited (CI: test/faults/database-faults.test.ts,
// 12 failed). The pool must fail that query, or retry it, and nothing else.

const unhandled: unknown[] = [];
const onUnhandled = (err: unknown) => unhandled.push(err);
let server: Awaited<ReturnType<typeof startFakePostgres>>;
beforeAll(async () => {
  process.on("unhandledRejection", onUnhandled);
  server = await startFakePostgres((s) => s.once("data", () => s.destroy())); // closed at its first query
});
afterAll(() => {
  process.off("unhandledRejection", onUnhandled);
  server?.close();
});

it("a connection closed while postgres.js looks up the array types fails no promise unheard", async () => {
  const database = openDatabase(server.url, { max: 2 });
  try {
    const outcome = await Promise.race([database.sql`select 1`.then(() => "answered", (err: Error) => `failed: ${(err as { code?: string }).code ?? err.message}`), new Promise((r) => setTimeout(() => r("still waiting"), 1_500))]);
    expect(outcome).not.toBe("answered");
    await new Promise((r) => setTimeout(r, 300)); // unhandled rejections are reported on a later turn
    expect(unhandled.map(String)).toEqual([]);
  } finally {
    await database.sql.end({ timeout: 0 }).catch(() => {});
  }
});
