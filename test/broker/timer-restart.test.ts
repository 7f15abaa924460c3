import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { advanceClock } from "../helpers/clock.ts";
import { openWait } from "../helpers/http.ts";
import { createTestDatabase, startTestApp } from "../helpers/test-app.ts";

describe("a timer that comes due while signalbox is down", () => {
  it("fires after the restart, once", async () => {
    const db = await createTestDatabase();
    const sql = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      const before = await startTestApp({ databaseUrl: db.url });
      const { body: wait } = await openWait(before, "nap-run", { signal: "nap", timer: { delay_s: 600 } }, 201);
      await before.close(); // every process is down when the timer comes due
      await advanceClock(sql, 601);
      const [due] = await sql<{ fires_at: Date; past: boolean }[]>`select fires_at, fires_at < now() as past from signalbox.waits where id = ${wait.id}`;
      expect(due!.past).toBe(true);

      const after = await startTestApp({ databaseUrl: db.url });
      try {
        const fired = (await (await after.api(`/waits/${wait.id}?wait_s=10`)).json()) as { status: string; result: { payload: { fired_at: string } } };
        expect(fired.status).toBe("received");
        expect(Date.parse(fired.result.payload.fired_at)).toBeGreaterThan(due!.fires_at.getTime());
        const events = ((await (await after.api("/runs/nap-run/events")).json()) as { items: Array<{ type: string }> }).items.map((e) => e.type);
        expect(events).toEqual(["signal.waiting", "signal.received"]);
      } finally {
        await after.close();
      }
    } finally {
      await sql.end();
      await db.drop();
    }
  });
});
