import { describe, expect, it } from "vitest";
import { EVENT_TYPES } from "../../src/events/events.queries.ts";
import { OUTCOMES } from "../../src/signals/signal-outcome.ts";
import { useTestSql } from "../helpers/test-app.ts";

// Enumerated text columns are CHECK constraints (src/db/schema.ts); the TypeScript lists that
// name the same values must not drift from them.

const testSql = useTestSql();

/** The quoted values a CHECK (... in ('a', 'b')) constraint allows. */
async function allowed(constraint: string): Promise<string[]> {
  const [row] = await testSql()<{ def: string }[]>`select pg_get_constraintdef(oid) as def from pg_constraint where conname = ${constraint}`;
  return [...row!.def.matchAll(/'([^']+)'/g)].map((m) => m[1]!).sort();
}

describe("enumerated columns", () => {
  it("events.type is exactly EVENT_TYPES", async () => {
    expect(await allowed("events_type")).toEqual([...EVENT_TYPES].sort());
  });

  it("signals.outcome is every recorded OUTCOME (not duplicate, an answer only) and expired", async () => {
    const recorded = new Set<string>([...OUTCOMES.filter((o) => o !== "duplicate"), "expired"]);
    expect(await allowed("signals_outcome")).toEqual([...recorded].sort());
  });
});
