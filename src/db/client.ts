import postgres from "postgres";
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import * as schema from "./schema.ts";

export type Db = PostgresJsDatabase<typeof schema>;
/** A transaction handle: the same query surface as Db, bound to one connection. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];
export type Queryable = Db | Tx;

export interface Database {
  db: Db;
  sql: postgres.Sql;
  close(): Promise<void>;
}

/**
 * The pool for the HTTP verbs. Kept modest on purpose: every add_job NOTIFYs, and notifying
 * commits serialise on Postgres's notify lock, so more connections make the signal path slower.
 */
export function openDatabase(url: string, opts: { max: number }): Database {
  const client = postgres(url, {
    max: opts.max,
    onnotice: () => {},
    // Bigints (sequences, event ids) come back as numbers; ids stay far below 2^53.
    types: { bigint: postgres.BigInt },
    connection: { application_name: "signalbox" },
  });
  const db = drizzle(client, { schema });
  return { db, sql: client, close: () => client.end({ timeout: 5 }) };
}
