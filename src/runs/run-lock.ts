import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

export type LockedRun = {
  run_id: string;
  status: "active" | "cancelled";
  last_sequence: number;
};

/**
 * Creates the run on first sight and takes its row lock for the rest of the transaction.
 * Every change to a run's waits and signals starts here, so two of them never interleave:
 * a signal and a wait committed at once always see each other, and `sequence` has no gaps.
 */
export async function lockRun(tx: Queryable, runId: string): Promise<LockedRun> {
  const [row] = await tx.execute<LockedRun>(sql`
    insert into signalbox.runs (run_id) values (${runId}::text)
    on conflict (run_id) do update set run_id = excluded.run_id
    returning run_id, status, last_sequence`);
  return { ...row!, last_sequence: Number(row!.last_sequence) };
}
