import postgres from "postgres";
import { postgresJs } from "./connection-url.ts";

/** Connections the probe opens after the first, each looking for the first one's backend. */
const LOOKS = 3;
/** A server that accepts and then never answers must not hold a start here (the migration reports it). */
const PROBE_LIMIT_MS = 10_000;
/**
 * How a pooler in statement mode refuses a transaction: PgBouncer closes the connection ("transaction
 * blocks not allowed in statement pooling mode", said in its log, not to the client). A server
 * never closes a connection that just answered for a BEGIN.
 */
const refusesTransactions = (err: Error & { code?: string }) => err.code === "CONNECTION_CLOSED" || /statement pool(ing)? mode/i.test(err.message);

/**
 * Whether `url` reaches Postgres through a pooler in transaction or statement mode (PgBouncer,
 * Supavisor; Neon's `-pooler` host, Supabase's port 6543), which hands one backend to many
 * client connections, a transaction at a time. signalbox needs a session of its own: its LISTEN
 * would hear nothing, its migration lock (a session advisory lock) would stay held on a backend
 * it no longer has, and graphile-worker's prepared statements would be missing. Behind such a
 * pooler it stayed up, not ready, logging errors without end; the start now stops and says so.
 *
 * Proved by two connections of ours being given the same backend: connected straight (or
 * through a pooler in session mode) a backend is its connection's alone while that connection
 * is open. The first connection's backend is let go after its statement, and a pooler hands
 * the most recently freed one out first (PgBouncer's default), or each in turn: the next
 * connections, each holding the backend it got in a transaction, come to it. Never a false
 * yes; a pooler with many idle backends handed out in turn may be missed (false). A pooler in
 * statement mode refuses the transaction: yes. Any other failure, or no answer within
 * PROBE_LIMIT_MS, is a no: connecting is the migration's to report.
 */
export async function sharesBackends(url: string): Promise<boolean> {
  // A client of one connection each, without the type lookup it has no use for (postgres.js's
  // reserve() never resolves without it).
  const connections: postgres.Sql[] = [];
  const connect = () => {
    const c = postgresJs(url, {
      max: 1,
      prepare: false, // a pooler in transaction mode may not keep prepared statements
      fetch_types: false,
      connect_timeout: 5,
      onnotice: () => {},
      connection: { application_name: "signalbox-probe" },
    });
    connections.push(c);
    return c;
  };
  const endAll = (timeout: number) => Promise.all(connections.map((c) => c.end({ timeout }).catch(() => {})));
  const backendOf = async (c: postgres.Sql) => Number((await c<Array<{ pid: number }>>`select pg_backend_pid() as pid`)[0]!.pid);
  // Past the limit the connections are closed: whatever the probe awaits then fails, a no.
  const limit = setTimeout(() => void endAll(0), PROBE_LIMIT_MS);
  try {
    const first = connect();
    const pid = await backendOf(first);
    for (let i = 0; i < LOOKS; i++) {
      const next = connect();
      if ((await backendOf(next)) === pid) return true;
      // Holds the backend it is given, so the next look gets another (this connection answered
      // just now: one closed at BEGIN is a pooler's refusal, not a server going away).
      const refused = await next.unsafe("begin").then(() => undefined, (err: Error) => err);
      if (refused) return refusesTransactions(refused);
      if ((await backendOf(next)) === pid) return true;
    }
    return (await backendOf(first)) !== pid;
  } catch {
    return false;
  } finally {
    clearTimeout(limit);
    await endAll(1);
  }
}
