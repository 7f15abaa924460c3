import { describe, expect, it } from "vitest";
import { createTestDatabase, startTestApp } from "../helpers/test-app.ts";

describe("a timer that comes due while signalbox is down", () => {
  it("fires after the restart, once", async () => {
    const db = await createTestDatabase();
    try {
      const before = await startTestApp({ databaseUrl: db.url });
      const wait = (await (await before.api("/runs/nap-run/waits", { method: "POST", json: { signal: "nap", timer: { delay_s: 0.8 } } })).json()) as { id: string; fires_at: string };
      await before.close(); // every process is down when the timer comes due
      await new Promise((r) => setTimeout(r, 1200));
      expect(Date.now()).toBeGreaterThan(Date.parse(wait.fires_at));

      const after = await startTestApp({ databaseUrl: db.url });
      try {
        const fired = (await (await after.api(`/waits/${wait.id}?wait_s=10`)).json()) as { status: string; result: { payload: { fired_at: string } } };
        expect(fired.status).toBe("received");
        expect(Date.parse(fired.result.payload.fired_at)).toBeGreaterThan(Date.parse(wait.fires_at));
        const events = ((await (await after.api("/runs/nap-run/events")).json()) as { items: Array<{ type: string }> }).items.map((e) => e.type);
        expect(events).toEqual(["signal.waiting", "signal.received"]);
      } finally {
        await after.close();
      }
    } finally {
      await db.drop();
    }
  });
});
