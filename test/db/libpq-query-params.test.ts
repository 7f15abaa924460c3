import net from "node:net";
import pg from "pg";
import postgres from "postgres";
import { afterAll, expect, inject, it } from "vitest";
import { nodePostgresTarget, postgresJs } from "../../src/db/connection-url.ts";

// libpq's query parameters (host, port, dbname, user, password) are the URL's own, for both drivers.
// README:
// "host, port, dbname, user and password may come as query parameters, as libpq reads them".
// Both drivers must end up at the same place.

const serverUrl = inject("pgServerUrl");
const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
afterAll(async () => {
  await admin.unsafe(`drop database if exists "my db" with (force)`);
  await admin.end();
});

it("?dbname= naming a database whose name needs percent-encoding reaches it with postgres.js as with node-postgres", async () => {
  await admin.unsafe(`drop database if exists "my db" with (force)`);
  await admin.unsafe(`create database "my db"`);
  const u = new URL(serverUrl);
  u.pathname = "/postgres";
  const url = `${u.toString()}${u.search ? "&" : "?"}dbname=my%20db`;

  const viaPg = new pg.Client(nodePostgresTarget(url));
  await viaPg.connect();
  const { rows } = await viaPg.query("select current_database() as db");
  await viaPg.end();
  expect(rows[0].db).toBe("my db");

  const sql = postgresJs(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`select current_database() as db`;
    expect(row!.db).toBe("my db");
  } finally {
    await sql.end({ timeout: 0 });
  }
});

it("?host=::1 (an IPv6 address) is where postgres.js connects, as node-postgres does", async () => {
  let reached!: () => void;
  const connected = new Promise<void>((r) => (reached = r));
  const server = net.createServer((s) => {
    reached();
    s.destroy();
  });
  await new Promise<void>((r) => server.listen(0, "::1", r));
  const port = (server.address() as net.AddressInfo).port;
  const sql = postgresJs(`postgres://u:p@localhost:1/d?host=::1&port=${port}`, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    void sql`select 1`.catch(() => {}); // it was never sent anywhere: getaddrinfo ENOTFOUND "["
    await connected;
  } finally {
    await sql.end({ timeout: 0 });
    server.close();
  }
});

it("a start that cannot connect to libpq's form of a URL names the host and port it tried", async () => {
  const { describeConnectError } = await import("../../src/db/connect-error.ts");
  const line = describeConnectError({ code: "ECONNREFUSED" }, "postgresql:///db?host=db.internal&port=5433", "DATABASE_URL");
  expect(line).toContain("db.internal:5433");
});

it("a URL whose password comes as a query parameter may also name a passfile (libpq reads it only without a password)", async () => {
  const { loadConfig } = await import("../../src/config.ts");
  expect(() => loadConfig({ DATABASE_URL: "postgres://u@db.example/d?password=secret&passfile=/home/u/.pgpass" })).not.toThrow();
});
