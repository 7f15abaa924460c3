import { sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";

export type LockedRun = {
  run_id: string;
  status: "active" | "cancelled" | "continued";
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

/**
 * lockRun for what is addressed to a run and goes wherever its work went: when the run was
 * continued (POST /runs/{run}/continue), the newest run of its chain, locked after it in chain
 * direction (signalbox.follow_chain, db/functions/run_chain.sql). A run never continued costs
 * what lockRun does: the one statement reads continued_as from the row it locks.
 */
export async function lockNewestRun(tx: Queryable, runId: string): Promise<LockedRun> {
  const [row] = await tx.execute<LockedRun & { continued_as: string | null }>(sql`
    insert into signalbox.runs (run_id) values (${runId}::text)
    on conflict (run_id) do update set run_id = excluded.run_id
    returning run_id, status, last_sequence, continued_as`);
  if (row!.continued_as === null) return { run_id: row!.run_id, status: row!.status, last_sequence: Number(row!.last_sequence) };
  const [newest] = await tx.execute<LockedRun>(sql`
    select c.run_id, c.status, r.last_sequence from signalbox.follow_chain(${row!.continued_as}::text) c
    join signalbox.runs r on r.run_id = c.run_id`);
  return { ...newest!, last_sequence: Number(newest!.last_sequence) };
}
