import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresJs } from "../../src/db/connection-url.ts";
import { guardedSockets } from "../../src/db/silent-connections.ts";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.ts";
import { enableTls, tlsUrl } from "../helpers/tls-postgres.ts";

// The silent-connection guard (src/db/silent-connections.ts) on one connection, plain and over
// TLS, with the server frozen (SIGSTOP: no error, no reset) at chosen moments. It once judged by
// byte counts, where an answer counted for everything written before it: a query pipelined
// behind an answered one, on a connection that went silent in between, then waited forever
// (and over TLS, where the counts were sampled, a query written in the same look as an answer).
const SILENT_MS = 2_000;
let pg: PrivatePostgres;
const urls: Record<string, string> = {};

beforeAll(async () => {
  pg = await startPrivatePostgres("silent-pipelined");
  urls.plain = pg.url;
  urls.tls = tlsUrl(pg, { sslmode: "verify-full", sslrootcert: (await enableTls(pg)).caFile });
}, 60_000);
afterAll(async () => pg?.destroy());

/** A client of one connection, known to the server by `name`. */
const client = (url: string, name: string) =>
  postgresJs(url, { max: 1, connect_timeout: 2, onnotice: () => {}, connection: { application_name: name }, ...({ socket: guardedSockets(SILENT_MS) } as object) });

async function backendPid(name: string): Promise<number> {
  const [row] = await pg.admin<Array<{ pid: number }>>`select pid from pg_stat_activity where application_name = ${name}`;
  return row!.pid;
}

const settled = (p: Promise<unknown>) => p.then(() => "answered", (e: { code?: string }) => `failed ${e.code}`);

describe.each(["plain", "tls"])("over %s", (over) => {
  it("a query pipelined behind an answered one fails soon when the server goes silent", async () => {
    const sql = client(urls[over]!, `pipelined-${over}`);
    try {
      await sql`select 1`; // connected, the statement types known
      const first = settled(sql`select 1`);
      const second = settled(sql`select pg_sleep(3)`); // written with the first, before its answer
      await new Promise((r) => setTimeout(r, 300));
      const pid = await backendPid(`pipelined-${over}`);
      process.kill(pid, "SIGSTOP");
      try {
        const started = performance.now();
        const outcome = await Promise.race([second, new Promise((r) => setTimeout(() => r("still waiting"), SILENT_MS + 3_000))]);
        expect({ first: await first, second: outcome }).toEqual({ first: "answered", second: "failed CONNECTION_CLOSED" });
        expect(performance.now() - started).toBeLessThan(SILENT_MS + 3_000);
      } finally {
        process.kill(pid, "SIGCONT");
      }
      expect(await settled(sql`select 1`)).toBe("answered"); // on a new connection
    } finally {
      await sql.end({ timeout: 1 });
    }
  }, 30_000);

  it("an idle connection is kept however long nothing is said", async () => {
    const sql = client(urls[over]!, `idle-${over}`);
    try {
      await sql`select ${1}::int`;
      const pid = await backendPid(`idle-${over}`);
      await new Promise((r) => setTimeout(r, SILENT_MS * 2));
      await sql`select ${2}::int`;
      expect(await backendPid(`idle-${over}`)).toBe(pid);
    } finally {
      await sql.end({ timeout: 1 });
    }
  }, 30_000);
});
