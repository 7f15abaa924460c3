import { afterAll, beforeAll, expect } from "vitest";
import { startPrivatePostgres, type PrivatePostgres } from "./private-postgres.ts";
import { answers200, onDatabase, spawnService, type ServiceProcess } from "./service-process.ts";

/**
 * For a test file that causes faults in its own Postgres: a signalbox process on a Postgres of
 * its own (`startPrivatePostgres(name)`), ready, with the type `approval` (scheme none)
 * declared; killed, and the Postgres removed, after the file. Read `pg` and `svc` in the tests.
 * `reach` prepares the Postgres and gives the URL the service connects with (default: its URL).
 */
export function serviceOnOwnPostgres(
  name: string,
  env: Record<string, string> = {},
  reach: (pg: PrivatePostgres) => Promise<string> = async (pg) => pg.url,
): { pg: PrivatePostgres; svc: ServiceProcess } {
  const own = {} as { pg: PrivatePostgres; svc: ServiceProcess };
  beforeAll(async () => {
    own.pg = await startPrivatePostgres(name);
    own.svc = await spawnService(onDatabase(await reach(own.pg), { LOG_LEVEL: "warn", ...env }));
    await answers200(own.svc, "/readyz", 60_000);
    expect((await own.svc.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    if (own.svc?.alive()) own.svc.child.kill("SIGKILL");
    await own.pg?.destroy();
  });
  return own;
}
