import postgres from "postgres";
import { postgresJsTarget } from "./connection-url.ts";

/** Connections the probe opens after the first, each looking for the first one's backend. */
const LOOKS = 3;

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
 * yes; a pooler with many idle backends handed out in turn may be missed (false). Any failure
 * is a no: connecting is the migration's to report.
 */
export async function sharesBackends(url: string): Promise<boolean> {
  const target = postgresJsTarget(url);
  const sql = postgres(target.url, {
    path: target.path,
    ssl: target.ssl,
    max: LOOKS + 1,
    prepare: false, // a pooler in transaction mode may not keep prepared statements
    connect_timeout: 5,
    onnotice: () => {},
    connection: { application_name: "signalbox-probe" },
  });
  const held: postgres.ReservedSql[] = [];
  const backendOf = async (c: postgres.ReservedSql) => Number((await c<Array<{ pid: number }>>`select pg_backend_pid() as pid`)[0]!.pid);
  try {
    const first = await sql.reserve();
    held.push(first);
    const pid = await backendOf(first);
    for (let i = 0; i < LOOKS; i++) {
      const next = await sql.reserve();
      held.push(next);
      await next.unsafe("begin"); // holds the backend it is given, so the next look gets another
      if ((await backendOf(next)) === pid) return true;
    }
    return (await backendOf(first)) !== pid;
  } catch {
    return false;
  } finally {
    for (const c of held) c.release();
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}
