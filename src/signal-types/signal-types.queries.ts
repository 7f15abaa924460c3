import { asc, eq, getTableColumns, gt, sql } from "drizzle-orm";
import type { Queryable } from "../db/client.ts";
import { signalTypes } from "../db/schema.ts";
import type { SignalAuth, SignalTypeRow } from "./signal-type.ts";

export async function findSignalType(q: Queryable, name: string): Promise<SignalTypeRow | undefined> {
  const [row] = await q.select().from(signalTypes).where(eq(signalTypes.name, name));
  return row;
}

/** Every declared name (the set is bounded by what management declares, not by callers). */
export async function listSignalTypeNames(q: Queryable): Promise<string[]> {
  const rows = await q.select({ name: signalTypes.name }).from(signalTypes);
  return rows.map((r) => r.name);
}

export async function listSignalTypes(q: Queryable, after: string | undefined, limit: number) {
  return q
    .select()
    .from(signalTypes)
    .where(after === undefined ? undefined : gt(signalTypes.name, after))
    .orderBy(asc(signalTypes.name))
    .limit(limit + 1);
}

export interface SignalTypeValues {
  name: string;
  description: string | null;
  schema: unknown;
  auth: SignalAuth;
  bufferTtlS: number;
  responses: string[] | null;
  notifyUrl: string | null;
  remindersS: number[];
  startUrl: string | null;
}

/** Creates or replaces; `created` says which (xmax = 0 only on a freshly inserted row). */
export async function upsertSignalType(q: Queryable, v: SignalTypeValues): Promise<{ row: SignalTypeRow; created: boolean }> {
  const [result] = await q
    .insert(signalTypes)
    .values(v)
    .onConflictDoUpdate({
      target: signalTypes.name,
      set: {
        description: v.description,
        schema: v.schema,
        auth: v.auth,
        bufferTtlS: v.bufferTtlS,
        responses: v.responses,
        notifyUrl: v.notifyUrl,
        remindersS: v.remindersS,
        startUrl: v.startUrl,
        updatedAt: sql`now()`,
      },
    })
    .returning({ ...getTableColumns(signalTypes), created: sql<boolean>`(xmax = 0)` });
  const { created, ...row } = result!;
  return { row, created };
}

export async function deleteSignalType(q: Queryable, name: string): Promise<boolean> {
  const rows = await q.delete(signalTypes).where(eq(signalTypes.name, name)).returning({ name: signalTypes.name });
  return rows.length > 0;
}
