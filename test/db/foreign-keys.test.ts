import { describe, expect, it } from "vitest";
import { newId } from "../../src/core/ids.ts";
import { useTestSql } from "../helpers/test-app.ts";

// waits.run_id and events.run_id reference runs (migration 0014): every writer inserts the run
// row first (the run lock), and runs are never deleted. signals.run_id does not: a rejected
// signal records no run.

const testSql = useTestSql();
const code = (p: Promise<unknown>) => p.then(() => "ok", (err: { code?: string }) => err.code);

describe("foreign keys to runs", () => {
  it("a wait or an event of a run that has no row is refused", async () => {
    const sql = testSql();
    const run = `no-such-run-${newId("wt")}`;
    expect(await code(sql`insert into signalbox.waits (id, run_id, signal, kind) values (${newId("wt")}, ${run}, 'x', 'external')`)).toBe("23503");
    expect(await code(sql`insert into signalbox.events (run_id, type, data) values (${run}, 'run.paused', '{}'::jsonb)`)).toBe("23503");
  });

  it("a rejected signal needs no run row", async () => {
    const sql = testSql();
    const run = `no-such-run-${newId("wt")}`;
    expect(await code(sql`insert into signalbox.signals (id, run_id, signal, outcome, payload) values (${newId("sg")}, ${run}, 'x', 'rejected_unknown_signal', '{}')`)).toBe("ok");
  });
});
