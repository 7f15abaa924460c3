import { it } from "vitest";
import { serviceOnOwnPostgres } from "../helpers/own-postgres-service.ts";
import { expectSilentPoolConnectionReplaced } from "../helpers/silent-pool.ts";
import { enableTls, tlsUrl } from "../helpers/tls-postgres.ts";

// As silent-pool-connection.test.ts, over TLS (a managed Postgres): TLS reads the pool's sockets
// itself, so the guard (src/db/silent-connections.ts) reads what is owed from the TLS socket that
// postgres.js hands it.
const own = serviceOnOwnPostgres("silent-pool-tls", {}, async (pg) => tlsUrl(pg, { sslmode: "verify-full", sslrootcert: (await enableTls(pg)).caFile }));

it("over TLS, a pool connection gone silent answers 503 soon and is replaced", async () => {
  const [onTls] = await own.pg.admin<Array<{ n: number }>>`
    select count(*)::int as n from pg_stat_activity a join pg_stat_ssl s using (pid) where a.application_name = 'signalbox' and s.ssl`;
  if (!onTls?.n) throw new Error("the pool is not on TLS");
  await expectSilentPoolConnectionReplaced(own);
}, 90_000);
