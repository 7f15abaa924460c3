import postgres from "postgres";
import { drizzle, type PostgresJsDatabase } from "drizzle-orm/postgres-js";
import { postgresJs } from "./connection-url.ts";
import * as schema from "./schema.ts";
import { guardedSockets } from "./silent-connections.ts";
import { keptFor } from "../core/kept-for.ts";

export type Db = PostgresJsDatabase<typeof schema>;
/** A transaction handle: the same query surface as Db, bound to one connection. */
export type Tx = Parameters<Parameters<Db["transaction"]>[0]>[0];
export type Queryable = Db | Tx;

export interface Database {
  db: Db;
  sql: postgres.Sql;
  close(): Promise<void>;
}

export const CONNECT_TIMEOUT_S = 1;
/** Seconds before connection attempt `n` (1, 2, ...) after a failure: 50 ms doubling to 500 ms, jittered. */
export const reconnectDelayS = (n: number) => Math.min(0.5, 0.05 * 2 ** Math.max(0, n - 1)) * (0.5 + Math.random() / 2);

/**
 * The pool for the HTTP verbs. Kept modest on purpose: every add_job NOTIFYs, and notifying
 * commits serialise on Postgres's notify lock, so more connections make the signal path slower.
 */
export function openDatabase(url: string, opts: { max: number }): Database {
  const client = postgresJs(url, {
    max: opts.max,
    // While the database is away, nothing may wait on it for long: a connection attempt gives up
    // after CONNECT_TIMEOUT_S, and a failed one is tried again soon (postgres.js's default backoff
    // grows to 20 s, and queued queries would wait that long for a connection).
    connect_timeout: CONNECT_TIMEOUT_S,
    backoff: reconnectDelayS,
    // A connection that stopped answering is dropped and replaced (see guardedSockets). The
    // option is postgres.js's own, missing from its types.
    ...({ socket: guardedSockets() } as object),
    onnotice: () => {},
    // Bigints (sequences, event ids) come back as numbers; ids stay far below 2^53.
    types: { bigint: postgres.BigInt },
    connection: { application_name: "signalbox" },
  });
  const db = drizzle(preparing(client), { schema });
  return { db, sql: client, close: () => client.end({ timeout: 5 }) };
}

const UNPREPARED = Symbol("the client under preparing()");
const unpreparedDbs = new WeakMap<Db, Db>();

/**
 * The same pool, with each statement planned for the values it is given (postgres.js's unnamed
 * statements): for queries whose best plan depends on them. A prepared statement goes generic
 * after five runs, one plan for every value; GET /waits over a million open waits then walked a
 * signal's waits in created_at order for a deadline that only 15 of them meet (120 ms, where the
 * deadline index and a sort take 1 ms). Costs a plan per call (under a millisecond).
 */
export function unprepared(db: Db): Db {
  return keptFor(unpreparedDbs, db, () => drizzle(unpreparedClient(db), { schema }));
}

/** The postgres.js pool under a drizzle handle, its statements unnamed (planned for their values, as unprepared's). */
export function unpreparedClient(db: Db): postgres.Sql {
  const client = (db as Db & { $client: postgres.Sql & { [UNPREPARED]?: postgres.Sql } }).$client;
  return client[UNPREPARED] ?? client;
}

/**
 * drizzle sends every query through postgres.js `unsafe()` unprepared (drizzle#5502), so
 * Postgres parses and plans each statement every time. Our statements have fixed texts (values
 * are always parameters), so preparing them is safe and saves that work: this wraps the client,
 * and the transaction clients it hands out, to ask for prepared statements.
 */
function preparing(sql: postgres.Sql): postgres.Sql {
  type Callback = (inner: postgres.Sql) => unknown;
  const wrapScope = (method: (...args: unknown[]) => unknown) => (...args: unknown[]) => {
    const callback = args[args.length - 1] as Callback;
    return method(...args.slice(0, -1), (inner: postgres.Sql) => callback(preparing(inner)));
  };
  return new Proxy(sql, {
    get(target, prop, receiver) {
      if (prop === UNPREPARED) return target;
      if (prop === "unsafe") {
        return (query: string, params?: unknown[], options?: postgres.UnsafeQueryOptions) => target.unsafe(query, params as never, { ...options, prepare: true });
      }
      if (prop === "begin" || prop === "savepoint") return wrapScope((Reflect.get(target, prop) as (...a: unknown[]) => unknown).bind(target));
      return Reflect.get(target, prop, receiver);
    },
  });
}
