import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { nodePostgresTarget, postgresJsTarget, tlsOf } from "../../src/db/connection-url.ts";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.ts";
import { answers200, onDatabase, spawnService, type ServiceProcess } from "../helpers/service-process.ts";
import { enableTls, revocationList, tlsUrl } from "../helpers/tls-postgres.ts";
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
      expect(nodePostgresTarget(`${base}?sslmode=require&uselibpqcompat=true`)).toEqual({ sslnegotiation: "postgres", connectionString: base, ssl: { rejectUnauthorized: false } });
      // PostgreSQL 17's direct TLS: postgres.js speaks it; node-postgres would read it as ssl=true (checked against Node's CAs).
      expect(postgresJsTarget(`${base}?sslmode=require&sslnegotiation=direct`)).toEqual({ url: `${base}?sslnegotiation=direct`, ssl: { rejectUnauthorized: false } });
      expect(nodePostgresTarget(`${base}?sslmode=require&sslnegotiation=direct`)).toEqual({ sslnegotiation: "postgres", connectionString: base, ssl: { rejectUnauthorized: false } });
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
    expect(nodePostgresTarget(`${base}?host=/run/pg&sslmode=verify-full`)).toEqual({ sslnegotiation: "postgres", connectionString: `${base}?host=%2Frun%2Fpg`, ssl: false });
  });

  it("sslmode=prefer or allow (plain text when the server has no TLS) stops the start and says why", () => {
    for (const mode of ["prefer", "allow", "verify"]) {
      expect(() => loadConfig({ DATABASE_URL: `postgres://u@db.example/db?sslmode=${mode}` })).toThrow(`sslmode=${mode} is not supported`);
    }
  });

  // A managed provider's URL carries more of libpq's parameters (Neon's: channel_binding), and
  // postgres.js sent each one it does not know to the server as a setting: every start failed on
  // "unrecognized configuration parameter".
  it("libpq's client-side knobs are accepted and passed to neither driver; a guarantee neither driver can give stops the start and says why", () => {
    const base = "postgres://u:p@db.example:5432/db";
    const knobs = [
      "channel_binding=prefer", "channel_binding=disable", "gssencmode=prefer", "gssencmode=disable", "keepalives=1", "keepalives_idle=30",
      "keepalives_interval=5", "keepalives_count=3", "fallback_application_name=x", "sslcompression=0", "sslsni=1", "sslkeylogfile=/tmp/k",
      "krbsrvname=postgres", "gsslib=gssapi", "gssdelegation=0", "load_balance_hosts=disable", "target_session_attrs=any", "requiressl=0",
      "sslcertmode=allow", "passfile=/home/u/.pgpass",
    ];
    for (const knob of knobs) {
      expect(() => loadConfig({ DATABASE_URL: `${base}?${knob}` }), knob).not.toThrow();
      expect(postgresJsTarget(`${base}?${knob}&application_name=x`), knob).toEqual({ url: `${base}?application_name=x`, ssl: false });
      expect(nodePostgresTarget(`${base}?${knob}`), knob).toEqual({ sslnegotiation: "postgres", connectionString: base, ssl: false });
    }
    // Those postgres.js knows stay: they are its options, or settings the server has.
    expect(postgresJsTarget(`${base}?connect_timeout=10&target_session_attrs=read-write&options=-c%20statement_timeout%3D5000`).url).toBe(
      `${base}?connect_timeout=10&options=-c%20statement_timeout%3D5000&target_session_attrs=read-write`,
    );
    const refused = [
      ["channel_binding=require", "cannot bind SCRAM to TLS"],
      ["gssencmode=require", "GSSAPI encryption"],
      ["sslcertmode=require", "cannot be checked"],
      ["ssl_min_protocol_version=TLSv1.4", "use one of TLSv1, TLSv1.1, TLSv1.2, TLSv1.3"],
      ["target_session_attrs=whatever", "use any, read-write"],
      ["require_auth=scram-sha-256", "cannot be limited"],
      ["requirepeer=postgres", "cannot be checked"],
      ["service=prod", "pg_service.conf is not read"],
      ["hostaddr=10.0.0.1", "the URL's host"],
    ];
    for (const [param, why] of refused) {
      expect(() => loadConfig({ DATABASE_URL: `${base}?${param}` }), param).toThrow(`DATABASE_URL: ${param} is not supported: `);
      expect(() => loadConfig({ DATABASE_URL: `${base}?${param}` }), param).toThrow(why);
    }
    // Given twice, a parameter is its last value, as libpq reads it (appending `&sslmode=verify-full` hardens a provider's URL).
    expect(tlsOf(`${base}?sslmode=require&sslmode=verify-full`).tls).toEqual({ rejectUnauthorized: true });
    expect(() => loadConfig({ DATABASE_URL: `${base}?channel_binding=disable&channel_binding=require` })).toThrow("channel_binding=require is not supported");
    expect(postgresJsTarget(`${base}?target_session_attrs=any&target_session_attrs=read-write`).url).toBe(`${base}?target_session_attrs=read-write`);
    expect(postgresJsTarget(`${base}?target_session_attrs=read-write&target_session_attrs=any`).url).toBe(base);
    // A password file is libpq's only when the URL has no password.
    expect(() => loadConfig({ DATABASE_URL: "postgres://u@db.example/db?passfile=/home/u/.pgpass" })).toThrow("passfile=/home/u/.pgpass is not supported: a password file is not read");
  });

  // libpq reads host, port, dbname, user and password from the query too, over the URL's own
  // (`postgresql:///db?host=h&port=5433`, as its docs write them). postgres.js sent them to the
  // server as settings (the start failed), and connected to the URL's own host and port.
  it("host, port, dbname, user and password given as query parameters are the URL's own, for both drivers", () => {
    const given = "postgres://a:b@h1:1/d1?host=h2&port=2&dbname=d2&user=u2&password=p2&application_name=x";
    expect(postgresJsTarget(given)).toEqual({ url: "postgres://u2:p2@h2:2/d2?application_name=x", ssl: false });
    expect(nodePostgresTarget(given)).toEqual({ sslnegotiation: "postgres", connectionString: "postgres://u2:p2@h2:2/d2?application_name=x", ssl: false });
    expect(postgresJsTarget("postgresql:///d?dbname=my%20db&user=al%40ice&password=p%2Fw%3A&host=db.example").url).toBe("postgresql://al%40ice:p%2Fw%3A@db.example/my%20db");
    expect(postgresJsTarget("postgres://u@localhost/d?host=::1&port=6000").url).toBe("postgres://u@[::1]:6000/d");
    // A socket directory stays the host parameter each driver reads; the port names its socket.
    expect(postgresJsTarget("postgres:///d?host=/run/pg&port=6000")).toEqual({ url: "postgres://localhost:6000/d", path: "/run/pg/.s.PGSQL.6000", ssl: false });
    for (const [param, why] of [
      ["host=a.example,b.example", "one host"],
      ["port=5432,5433", "one port number"],
      ["port=x", "one port number"],
    ]) {
      expect(() => loadConfig({ DATABASE_URL: `postgres://u@db.example/d?${param}` }), param).toThrow(`DATABASE_URL: ${param} is not supported: `);
      expect(() => loadConfig({ DATABASE_URL: `postgres://u@db.example/d?${param}` }), param).toThrow(why);
    }
  });

  // PostgreSQL 18's libpq bounds the protocol version; both drivers speak 3.0.
  it("min_protocol_version / max_protocol_version (libpq 18): accepted when 3.0 is allowed, and passed to neither driver; otherwise refused", () => {
    const base = "postgres://u:p@db.example:5432/db";
    for (const ok of ["min_protocol_version=3.0", "max_protocol_version=3.0", "max_protocol_version=3.2", "max_protocol_version=latest"]) {
      expect(() => loadConfig({ DATABASE_URL: `${base}?${ok}` }), ok).not.toThrow();
      expect(postgresJsTarget(`${base}?${ok}`).url, ok).toBe(base);
      expect(nodePostgresTarget(`${base}?${ok}`).connectionString, ok).toBe(base);
    }
    for (const [param, why] of [
      ["min_protocol_version=3.2", "speak protocol 3.0 only"],
      ["min_protocol_version=latest", "speak protocol 3.0 only"],
      ["max_protocol_version=2.0", "use 3.0, 3.2 or latest"],
    ]) {
      expect(() => loadConfig({ DATABASE_URL: `${base}?${param}` }), param).toThrow(`DATABASE_URL: ${param} is not supported: `);
      expect(() => loadConfig({ DATABASE_URL: `${base}?${param}` }), param).toThrow(why);
    }
  });

  // libpq reads PGSSLMODE, PGSSLROOTCERT... where the URL does not say; providers' guides set them
  // beside a plain URL. Ignored, signalbox connected in plain text where psql used TLS.
  it("libpq's TLS environment variables (PGSSLMODE, PGSSLROOTCERT...) are read where the URL does not say; a value neither driver can honour stops the start", async () => {
    const base = "postgres://u:p@db.example:5432/db";
    const ca = `/tmp/signalbox-tls-env-${process.pid}.pem`;
    await fs.writeFile(ca, "-----BEGIN CERTIFICATE-----\nenv\n-----END CERTIFICATE-----\n");
    const tlsFor = (env: Record<string, string>) => tlsOf(loadConfig(env).DATABASE_URL!);
    try {
      expect(tlsFor({ DATABASE_URL: base, PGSSLMODE: "require" })).toEqual({ url: base, tls: { rejectUnauthorized: false } });
      expect(tlsFor({ DATABASE_URL: base, PGSSLMODE: "verify-full", PGSSLROOTCERT: ca })).toEqual({ url: base, tls: { ca: expect.stringContaining("env"), rejectUnauthorized: true } });
      expect(tlsFor({ DATABASE_URL: base, PGSSLROOTCERT: "system" }).tls).toEqual({ rejectUnauthorized: true });
      expect(tlsFor({ DATABASE_URL: base, PGREQUIRESSL: "1", PGSSLMINPROTOCOLVERSION: "TLSv1.3" }).tls).toEqual({ minVersion: "TLSv1.3", rejectUnauthorized: false });
      // The URL's own parameter wins, as in libpq (node-postgres's `ssl` and requiressl as well as sslmode).
      expect(tlsFor({ DATABASE_URL: `${base}?sslmode=disable`, PGSSLMODE: "verify-full" }).tls).toBe(false);
      expect(tlsFor({ DATABASE_URL: `${base}?ssl=true`, PGSSLMODE: "verify-full" }).tls).toEqual({ rejectUnauthorized: false });
      expect(tlsFor({ DATABASE_URL: `${base}?sslmode=verify-full&sslrootcert=system`, PGSSLROOTCERT: ca }).tls).toEqual({ rejectUnauthorized: true });
      // An empty variable is unset; a Unix socket is never TLS; the embedded Postgres (no URL) is not affected.
      expect(tlsFor({ DATABASE_URL: base, PGSSLMODE: "" }).tls).toBe(false);
      expect(postgresJsTarget(loadConfig({ DATABASE_URL: `${base}?host=/run/pg`, PGSSLMODE: "verify-full" }).DATABASE_URL!).ssl).toBe(false);
      expect(loadConfig({ PGSSLMODE: "verify-full" }).DATABASE_URL).toBeUndefined();
      // Refused as the URL's parameter would be, named by the variable; not when the URL says instead.
      expect(() => loadConfig({ DATABASE_URL: base, PGSSLMODE: "prefer" })).toThrow("PGSSLMODE: prefer is not supported: use disable, require");
      expect(() => loadConfig({ DATABASE_URL: base, PGSSLCERTMODE: "require" })).toThrow("PGSSLCERTMODE: require is not supported");
      expect(() => loadConfig({ DATABASE_URL: `${base}?sslmode=require`, PGSSLMODE: "prefer" })).not.toThrow();
      // PGCHANNELBINDING=require asks for what neither driver does: refused, as in the URL.
      expect(() => loadConfig({ DATABASE_URL: base, PGCHANNELBINDING: "require" })).toThrow("PGCHANNELBINDING: require is not supported: signalbox's Postgres driver cannot bind SCRAM");
      expect(tlsFor({ DATABASE_URL: base, PGCHANNELBINDING: "prefer", PGGSSENCMODE: "disable" })).toEqual({ url: base, tls: false });
      // The system's CAs only with verify-full (libpq 16 refuses a weaker sslmode with them), whichever side gives each.
      expect(() => loadConfig({ DATABASE_URL: `${base}?sslrootcert=system`, PGSSLMODE: "disable" })).toThrow("sslrootcert=system is not supported: give sslmode=verify-full");
      expect(() => loadConfig({ DATABASE_URL: `${base}?sslmode=disable`, PGSSLROOTCERT: "system" })).toThrow("PGSSLROOTCERT: system is not supported: give sslmode=verify-full");
      expect(() => loadConfig({ DATABASE_URL: base, PGSSLMODE: "require", PGSSLROOTCERT: "system" })).toThrow("PGSSLROOTCERT: system is not supported");
      expect(() => loadConfig({ DATABASE_URL: `${base}?sslmode=require&sslrootcert=system` })).toThrow("sslrootcert=system is not supported");
      // A file that cannot be read is named at start, with where it came from.
      expect(() => loadConfig({ DATABASE_URL: base, PGSSLMODE: "verify-full", PGSSLROOTCERT: "/nonexistent/ca.pem" })).toThrow("PGSSLROOTCERT: /nonexistent/ca.pem is not supported: it cannot be read (ENOENT)");
      expect(() => loadConfig({ DATABASE_URL: `${base}?sslmode=require&sslcert=/nonexistent/c.pem&sslkey=/nonexistent/k.pem` })).toThrow("sslcert=/nonexistent/c.pem is not supported: it cannot be read (ENOENT)");
      expect(() => loadConfig({ DATABASE_URL: `${base}?sslmode=disable&sslrootcert=/nonexistent/ca.pem` })).not.toThrow(); // no TLS: not read
      expect(() => loadConfig({ DATABASE_URL: `${base}?sslcert=/nonexistent/c.pem` })).not.toThrow(); // no sslmode: no TLS here
      // node-postgres would read PGSSLNEGOTIATION itself: `direct` on a socket (no TLS) threw.
      process.env.PGSSLNEGOTIATION = "direct";
      try {
        expect(() => new pg.Client(nodePostgresTarget(loadConfig({ DATABASE_URL: `${base}?host=/run/pg` }).DATABASE_URL!))).not.toThrow();
      } finally {
        delete process.env.PGSSLNEGOTIATION;
      }
      // PGREQUIRESSL as libpq reads it: its first character.
      expect(tlsFor({ DATABASE_URL: base, PGREQUIRESSL: "1yes" }).tls).toEqual({ rejectUnauthorized: false });
      expect(tlsFor({ DATABASE_URL: base, PGREQUIRESSL: "0" }).tls).toBe(false);
    } finally {
      await fs.rm(ca, { force: true });
    }
  });

  it("libpq's other TLS parameters: requiressl=1, sslpassword, sslcertmode=disable, sslcrl, sslcrldir, ssl_min/max_protocol_version", async () => {
    const base = "postgres://u:p@db.example:5432/db";
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-tls-unit-"));
    try {
      const f = (name: string) => path.join(dir, name);
      for (const name of ["cert.pem", "key.pem", "one.crl"]) await fs.writeFile(f(name), `${name}\n`);
      await fs.mkdir(f("crls"));
      for (const name of ["a.r0", "b.r0"]) await fs.writeFile(f(`crls/${name}`), `${name}\n`);
      expect(tlsOf(`${base}?requiressl=1`)).toEqual({ url: base, tls: { rejectUnauthorized: false } });
      expect(tlsOf(`${base}?requiressl=1&sslmode=disable`)).toEqual({ url: base, tls: false });
      const client = `sslmode=require&sslcert=${f("cert.pem")}&sslkey=${f("key.pem")}&sslpassword=s3cret`;
      expect(tlsOf(`${base}?${client}`)).toEqual({ url: base, tls: { cert: "cert.pem\n", key: "key.pem\n", passphrase: "s3cret", rejectUnauthorized: false } });
      expect(tlsOf(`${base}?${client}&sslcertmode=disable`)).toEqual({ url: base, tls: { rejectUnauthorized: false } });
      const revoked = tlsOf(`${base}?sslmode=verify-full&sslcrl=${f("one.crl")}&sslcrldir=${f("crls")}&ssl_min_protocol_version=TLSv1.2&ssl_max_protocol_version=TLSv1.3`);
      expect(revoked.url).toBe(base);
      expect(revoked.tls).toMatchObject({ minVersion: "TLSv1.2", maxVersion: "TLSv1.3", rejectUnauthorized: true });
      expect(new Set((revoked.tls as { crl: string[] }).crl)).toEqual(new Set(["one.crl\n", "a.r0\n", "b.r0\n"]));
    } finally {
      await fs.rm(dir, { recursive: true, force: true });
    }
  });
});

describe("signalbox on a Postgres over TLS whose CA is its own", () => {
  let pg: PrivatePostgres;
  let caFile: string;
  let tls: { caFile: string; dir: string };
  const services: ServiceProcess[] = [];
  beforeAll(async () => {
    pg = await startPrivatePostgres("tls");
    tls = await enableTls(pg);
    caFile = tls.caFile;
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

  it("a plain URL with PGSSLMODE=verify-full and PGSSLROOTCERT (libpq's variables): every connection on TLS, the certificate checked", async () => {
    const svc = await spawnService(onDatabase(tlsUrl(pg, {}), { LOG_LEVEL: "warn", PGSSLMODE: "verify-full", PGSSLROOTCERT: caFile }));
    services.push(svc);
    await answers200(svc, "/readyz", 60_000);
    expect((await svc.api("/signal-types/tls-env", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBeLessThan(300);
    await expectTimeoutOverTls(svc, "tls-env", 20_000);
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

  it("a provider's URL with libpq's other parameters (Neon's channel_binding, keepalives...): ready, and every connection on the TLS version it bounds", async () => {
    const params = {
      sslmode: "verify-full", sslrootcert: caFile, channel_binding: "prefer", keepalives: "1", keepalives_idle: "30", connect_timeout: "10",
      target_session_attrs: "any", gssencmode: "disable", sslsni: "1", fallback_application_name: "x", ssl_max_protocol_version: "TLSv1.2",
    };
    const svc = await startOnTls(params, "tls-params");
    const versions = await pg.admin<Array<{ version: string }>>`
      select s.version from pg_stat_activity a join pg_stat_ssl s using (pid) where a.application_name like 'signalbox%'`;
    expect(versions.length).toBeGreaterThanOrEqual(4);
    expect(new Set(versions.map((v) => v.version))).toEqual(new Set(["TLSv1.2"])); // TLSv1.3 when not bounded
    await expectTimeoutOverTls(svc, "tls-params", 20_000);
  }, 90_000);

  it("a URL whose host, port, database and user come as query parameters (libpq's form): every connection goes where they say", async () => {
    const real = new URL(pg.url);
    const url = `postgres://nobody@localhost:1/nodb?${new URLSearchParams({ sslmode: "verify-full", sslrootcert: caFile, host: "localhost", port: real.port, dbname: real.pathname.slice(1), user: real.username })}`;
    const svc = await spawnService(onDatabase(url, { LOG_LEVEL: "warn" }));
    services.push(svc);
    await answers200(svc, "/readyz", 60_000);
    expect((await svc.api("/signal-types/tls-query", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBeLessThan(300);
    await expectTimeoutOverTls(svc, "tls-query", 20_000);
  }, 90_000);

  it("sslcrl: a list that revokes the server's certificate refuses it; one that does not, does not", async () => {
    const svc = await startOnTls({ sslmode: "verify-full", sslrootcert: caFile, sslcrl: await revocationList(tls, false) }, "tls-crl");
    svc.child.kill("SIGKILL");
    await waitFor("its backends gone", async () => (await backends()).length, { until: (n) => n === 0, timeoutMs: 20_000 });
    const revoked = await spawnService(onDatabase(tlsUrl(pg, { sslmode: "verify-full", sslrootcert: caFile, sslcrl: await revocationList(tls, true) }), { LOG_LEVEL: "warn" }));
    services.push(revoked);
    await waitFor("the certificate refused", () => !revoked.alive() || revoked.output().includes("certificate revoked"), { timeoutMs: 30_000 });
    expect(revoked.output()).toContain("certificate revoked");
    expect(await backends()).toEqual([]);
  }, 90_000);
});
