import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { nodePostgresTarget, postgresJsTarget, tlsOf } from "../../src/db/connection-url.ts";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.ts";
import { answers200, onDatabase, spawnService, type ServiceProcess } from "../helpers/service-process.ts";
import { enableTls, tlsUrl } from "../helpers/tls-postgres.ts";
import { waitFor } from "../helpers/wait-for.ts";

// TLS to Postgres as libpq reads a URL (sslmode, sslrootcert), the same for every connection
// signalbox makes: the API's pool and LISTEN (postgres.js), migrations and both job runners
// (graphile-worker's node-postgres). A managed Postgres's CA is usually not among Node's.

describe("a URL's TLS parameters", () => {
  it("are read as libpq reads them, and never passed on to either driver", async () => {
    const ca = `/tmp/signalbox-tls-unit-${process.pid}.pem`;
    await fs.writeFile(ca, "-----BEGIN CERTIFICATE-----\nunit\n-----END CERTIFICATE-----\n");
    try {
      const base = "postgres://u:p@db.example:5432/db";
      expect(tlsOf(base)).toEqual({ url: base, tls: false });
      expect(tlsOf(`${base}?sslmode=disable`)).toEqual({ url: base, tls: false });
      expect(tlsOf(`${base}?sslmode=require`)).toEqual({ url: base, tls: { rejectUnauthorized: false } });
      expect(tlsOf(`${base}?ssl=true`)).toEqual({ url: base, tls: { rejectUnauthorized: false } });
      const full = tlsOf(`${base}?sslmode=verify-full&sslrootcert=${ca}&application_name=x`);
      expect(full).toEqual({ url: `${base}?application_name=x`, tls: { ca: expect.stringContaining("unit"), rejectUnauthorized: true } });
      const verifyCa = tlsOf(`${base}?sslmode=verify-ca&sslrootcert=${ca}`).tls as { rejectUnauthorized: boolean; checkServerIdentity?: () => undefined };
      expect(verifyCa.rejectUnauthorized).toBe(true);
      expect(verifyCa.checkServerIdentity?.()).toBeUndefined(); // any host name
      // require with a CA: as verify-ca (libpq).
      expect(tlsOf(`${base}?sslmode=require&sslrootcert=${ca}`).tls).toMatchObject({ rejectUnauthorized: true, checkServerIdentity: expect.any(Function) });
      expect(tlsOf(`${base}?sslmode=verify-full&sslrootcert=system`)).toEqual({ url: base, tls: { rejectUnauthorized: true } });
      expect(nodePostgresTarget(`${base}?sslmode=require&uselibpqcompat=true`)).toEqual({ connectionString: base, ssl: { rejectUnauthorized: false } });
      // PostgreSQL 17's direct TLS: postgres.js speaks it; node-postgres would read it as ssl=true (checked against Node's CAs).
      expect(postgresJsTarget(`${base}?sslmode=require&sslnegotiation=direct`)).toEqual({ url: `${base}?sslnegotiation=direct`, ssl: { rejectUnauthorized: false } });
      expect(nodePostgresTarget(`${base}?sslmode=require&sslnegotiation=direct`)).toEqual({ connectionString: base, ssl: { rejectUnauthorized: false } });
    } finally {
      await fs.rm(ca, { force: true });
    }
  });

  it("sslrootcert=system alone is verify-full (libpq 16); a '+' in a path is a '+'; a Unix socket is never TLS (libpq)", async () => {
    const base = "postgres://u:p@db.example:5432/db";
    expect(() => loadConfig({ DATABASE_URL: `${base}?sslrootcert=system` })).not.toThrow();
    expect(tlsOf(`${base}?sslrootcert=system`).tls).toEqual({ rejectUnauthorized: true });
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-tls-unit-"));
    try {
      const ca = path.join(dir, "ca+bundle.pem");
      await fs.writeFile(ca, "-----BEGIN CERTIFICATE-----\nplus\n-----END CERTIFICATE-----\n");
      expect(tlsOf(`${base}?sslmode=verify-full&sslrootcert=${ca}`).tls).toMatchObject({ ca: expect.stringContaining("plus") });
      expect(tlsOf(`${base}?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}`).tls).toMatchObject({ ca: expect.stringContaining("plus") });
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
    expect(postgresJsTarget(`${base}?host=/run/a+b&sslmode=require`)).toEqual({ url: base, path: "/run/a+b/.s.PGSQL.5432", ssl: false });
    expect(nodePostgresTarget(`${base}?host=/run/pg&sslmode=verify-full`)).toEqual({ connectionString: `${base}?host=%2Frun%2Fpg`, ssl: false });
  });

  it("sslmode=prefer or allow (plain text when the server has no TLS) stops the start and says why", () => {
    for (const mode of ["prefer", "allow", "verify"]) {
      expect(() => loadConfig({ DATABASE_URL: `postgres://u@db.example/db?sslmode=${mode}` })).toThrow(`sslmode=${mode} is not supported`);
    }
  });
});

describe("signalbox on a Postgres over TLS whose CA is its own", () => {
  let pg: PrivatePostgres;
  let caFile: string;
  const services: ServiceProcess[] = [];
  beforeAll(async () => {
    pg = await startPrivatePostgres("tls");
    caFile = (await enableTls(pg)).caFile;
  }, 120_000);
  afterAll(async () => {
    for (const s of services) if (s.alive()) s.child.kill("SIGKILL");
    await pg?.destroy();
  });

  /** The service's backends (application_name signalbox…), each with whether it is on TLS. */
  const backends = () => pg.admin<Array<{ name: string; ssl: boolean }>>`
    select a.application_name as name, coalesce(s.ssl, false) as ssl
    from pg_stat_activity a left join pg_stat_ssl s using (pid) where a.application_name like 'signalbox%'`;

  /** signalbox on the TLS Postgres through a URL with `params`, ready, with type `signal` (scheme none). */
  async function startOnTls(params: Record<string, string>, signal: string): Promise<ServiceProcess> {
    const svc = await spawnService(onDatabase(tlsUrl(pg, params), { LOG_LEVEL: "warn" }));
    services.push(svc);
    await answers200(svc, "/readyz", 60_000);
    expect((await svc.api(`/signal-types/${signal}`, { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBeLessThan(300);
    return svc;
  }

  /** A wait times out through the job runner; every backend of the service is on TLS; then it is killed and its backends gone. */
  async function expectTimeoutOverTls(svc: ServiceProcess, signal: string, timeoutMs: number): Promise<void> {
    const opened = await svc.api(`/runs/${signal}-run/waits`, { method: "POST", json: { signal, timeout_s: 1 } });
    expect(opened.status).toBe(201);
    const waitId = ((await opened.json()) as { id: string }).id;
    await waitFor("the wait timed out", async () => ((await (await svc.api(`/waits/${waitId}`)).json()) as { status: string }).status, { until: (s) => s === "timed_out", timeoutMs });
    const seen = await backends();
    expect(new Set(seen.map((b) => b.name))).toEqual(new Set(["signalbox", "signalbox-listen", "signalbox-worker-timers", "signalbox-worker-deliveries"]));
    expect(seen.filter((b) => !b.ssl)).toEqual([]);
    svc.child.kill("SIGKILL");
    await waitFor("its backends gone", async () => (await backends()).length, { until: (n) => n === 0, timeoutMs: 20_000 });
  }

  it.each([
    ["require (encrypted, the certificate not checked)", () => ({ sslmode: "require" })],
    ["verify-full with sslrootcert", () => ({ sslmode: "verify-full", sslrootcert: caFile })],
  ])("%s: ready, every connection on TLS, and a wait times out through the job runner", async (_name, params) => {
    await expectTimeoutOverTls(await startOnTls(params(), "tls"), "tls", 20_000);
  }, 90_000);

  it("after Postgres restarts (a crash), every connection comes back on TLS and a wait still times out", async () => {
    const svc = await startOnTls({ sslmode: "verify-full", sslrootcert: caFile }, "tls-restart");
    await pg.restart("immediate");
    await answers200(svc, "/readyz", 60_000);
    await expectTimeoutOverTls(svc, "tls-restart", 30_000);
  }, 120_000);

  it("verify-full against a name the certificate does not carry: refused (no connection made in the clear)", async () => {
    const u = new URL(tlsUrl(pg, { sslmode: "verify-full", sslrootcert: caFile }));
    u.hostname = "127.0.0.1";
    const svc = await spawnService(onDatabase(u.toString(), { LOG_LEVEL: "warn" }));
    services.push(svc);
    await waitFor("the certificate refused", () => !svc.alive() || svc.output().includes("does not match certificate"), { timeoutMs: 30_000 });
    expect(svc.output()).toContain("does not match certificate");
    expect(await backends()).toEqual([]);
  }, 60_000);
});
