import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sharesBackends } from "../../src/db/pooler-probe.ts";
import { startFakePostgres } from "../helpers/fake-postgres.ts";
import { PGBOUNCER, startPgbouncer, type Pooler } from "../helpers/pgbouncer.ts";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.ts";
import { answers200, onDatabase, spawnService, type ServiceProcess } from "../helpers/service-process.ts";
import { waitFor } from "../helpers/wait-for.ts";

// A managed Postgres's pooled URL (Neon's -pooler host, Supabase's port 6543) goes through a
// pooler in transaction mode, which hands one backend to many client connections. Behind one,
// signalbox stayed up and never ready, logging job-fetch errors without end (graphile-worker's
// prepared statements gone, LISTEN deaf), and its migration lock could stay held on a backend
// it no longer had. The start now stops and says what to use instead. A real PgBouncer here.

if (!PGBOUNCER) console.warn("skipping the pooler tests: pgbouncer is missing (apt-get install pgbouncer)");

describe.skipIf(!PGBOUNCER)("DATABASE_URL through a connection pooler (PgBouncer)", () => {
  let pg: PrivatePostgres;
  let pooler: Pooler;
  const services: ServiceProcess[] = [];
  beforeAll(async () => {
    pg = await startPrivatePostgres("pooler");
    pooler = await startPgbouncer(pg);
  }, 120_000);
  afterAll(async () => {
    for (const s of services) if (s.alive()) s.child.kill("SIGKILL");
    await pooler?.stop();
    await pg?.destroy();
  });

  it("is told apart: transaction and statement mode share backends; session mode and a direct URL do not; nothing there is a no", async () => {
    expect(await sharesBackends(pooler.transactionUrl)).toBe(true);
    expect(await sharesBackends(pooler.statementUrl)).toBe(true);
    expect(await sharesBackends(pooler.sessionUrl)).toBe(false);
    expect(await sharesBackends(pg.url)).toBe(false);
    expect(await sharesBackends("postgres://nobody@127.0.0.1:1/none")).toBe(false);
  });

  it("in transaction mode the start stops (exit 1) with one line naming DATABASE_URL and what to use instead; nothing was migrated", async () => {
    const svc = await spawnService(onDatabase(pooler.transactionUrl, { LOG_LEVEL: "warn" }));
    services.push(svc);
    await waitFor("the start refused", () => svc.alive(), { until: (alive) => !alive, timeoutMs: 30_000 });
    expect(svc.child.exitCode).toBe(1);
    expect(svc.output()).toContain("DATABASE_URL goes through a connection pooler in transaction or statement mode");
    expect(svc.output()).toContain("use the database's direct URL, or the pooler's session mode");
    const [migrated] = await pg.admin<Array<{ schema: string | null }>>`select to_regnamespace('signalbox')::text as schema`;
    expect(migrated!.schema).toBeNull();
  }, 60_000);

  it("in session mode signalbox is ready, and a wait times out through the job runner", async () => {
    const svc = await spawnService(onDatabase(pooler.sessionUrl, { LOG_LEVEL: "warn" }));
    services.push(svc);
    await answers200(svc, "/readyz", 60_000);
    expect((await svc.api("/signal-types/pooled", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBeLessThan(300);
    const opened = await svc.api("/runs/pooled-run/waits", { method: "POST", json: { signal: "pooled", timeout_s: 1 } });
    expect(opened.status).toBe(201);
    const { id } = (await opened.json()) as { id: string };
    await waitFor("the wait timed out", async () => ((await (await svc.api(`/waits/${id}`)).json()) as { status: string }).status, { until: (s) => s === "timed_out", timeoutMs: 20_000 });
  }, 90_000);
});

describe("the pooler probe", () => {
  it("never holds a start: a server that completes the start-up and then never answers is a no, within its limit", async () => {
    const silent = await startFakePostgres(() => {}); // then nothing, ever
    try {
      const started = performance.now();
      expect(await sharesBackends(silent.url)).toBe(false);
      expect(performance.now() - started).toBeLessThan(15_000);
    } finally {
      silent.close();
    }
  }, 30_000);
});
