import fs from "node:fs";
import type { ConnectionOptions } from "node:tls";

/**
 * TLS for one driver: none, or the options of Node's tls.connect. The same for postgres.js
 * (the API's pool, LISTEN, our migrations) and node-postgres (graphile-worker).
 */
export type DriverTls = false | ConnectionOptions;

/** The URL's TLS parameters (libpq's, and node-postgres's `ssl`): read here, never passed on. */
const TLS_PARAMS = ["sslmode", "sslrootcert", "sslcert", "sslkey", "ssl", "uselibpqcompat"];

/**
 * The TLS a URL asks for, as libpq reads sslmode, sslrootcert, sslcert and sslkey, for both
 * drivers alike. Left to themselves they disagree: node-postgres checks the certificate for
 * `require` against Node's own CAs (a managed Postgres whose CA is not among them refused every
 * start), and postgres.js reads no certificate file (it sent sslrootcert to the server as a
 * setting) and ignores the CA given.
 *  - require: encrypted, the certificate not checked; with sslrootcert, as verify-ca;
 *  - verify-ca: the certificate signed by sslrootcert's CA (Node's CAs without it), any host name;
 *  - verify-full: that, and the host name; sslrootcert=system: Node's CAs.
 */
export function tlsOf(url: string): { url: string; tls: DriverTls } {
  if (!URL.canParse(url)) return { url, tls: false };
  const u = new URL(url);
  const params = u.searchParams;
  const system = param(u, "sslrootcert") === "system";
  const mode = modeOf(params) ?? (system ? "verify-full" : "disable");
  const file = (name: string) => {
    const path = param(u, name);
    return path && path !== "system" ? fs.readFileSync(path, "utf8") : undefined;
  };
  let tls: DriverTls = false;
  // libpq uses no TLS on a Unix socket (`?host=/dir`), whatever sslmode says.
  if (mode !== "disable" && !param(u, "host")?.startsWith("/")) {
    const ca = file("sslrootcert");
    const checked = mode === "verify-full" || mode === "verify-ca" || ca !== undefined || system;
    tls = {
      ...(ca !== undefined ? { ca } : {}),
      ...(params.has("sslcert") ? { cert: file("sslcert"), key: file("sslkey") } : {}),
      rejectUnauthorized: checked,
      // verify-ca (and require with a CA): any name the certificate carries.
      ...(checked && mode !== "verify-full" && !system ? { checkServerIdentity: () => undefined } : {}),
    };
  }
  return { url: withParam(u, TLS_PARAMS).toString(), tls };
}

/**
 * A parameter as libpq decodes it: %XX only (URLSearchParams would read `+` as a space, and a
 * certificate at /etc/ca+bundle.pem would not be found).
 */
function param(u: URL, name: string): string | undefined {
  for (const pair of u.search.slice(1).split("&")) {
    const at = pair.indexOf("=");
    const key = at < 0 ? pair : pair.slice(0, at);
    if (safeDecode(key) === name) return at < 0 ? "" : safeDecode(pair.slice(at + 1));
  }
  return undefined;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** sslmode, or node-postgres's `ssl=true|false` when there is none. */
function modeOf(params: URLSearchParams): string | undefined {
  const mode = params.get("sslmode") ?? undefined;
  if (mode !== undefined) return mode;
  const ssl = params.get("ssl");
  if (ssl === null) return undefined;
  return ssl === "false" || ssl === "0" ? "disable" : "require";
}

/**
 * postgres.js's options for a URL. A database URL may name a Unix socket the way libpq and
 * node-postgres (graphile-worker's driver) read it: `?host=/path/to/dir` beside the port, the
 * socket being `<dir>/.s.PGSQL.<port>`. postgres.js takes a socket only as its `path` option (it
 * would send `host` to the server as a setting, which refuses it). TLS: see tlsOf.
 */
export function postgresJsTarget(url: string): { url: string; path?: string; ssl: DriverTls } {
  const { url: plain, tls } = tlsOf(url);
  if (!URL.canParse(plain)) return { url: plain, ssl: tls };
  const u = new URL(plain);
  const dir = param(u, "host");
  if (!dir?.startsWith("/")) return { url: plain, ssl: tls };
  return { url: withParam(u, ["host"]).toString(), path: `${dir}/.s.PGSQL.${u.port || "5432"}`, ssl: tls };
}

/**
 * node-postgres's options for a URL (it reads `?host=/dir` itself, `+` as a space: it gets %2B).
 * TLS: see tlsOf. Without `sslnegotiation` (PostgreSQL 17's direct TLS, which postgres.js
 * speaks): node-postgres would read it as `ssl=true`, checked against Node's CAs whatever sslmode
 * says, and negotiates TLS the usual way, which every server accepts.
 */
export function nodePostgresTarget(url: string): { connectionString: string; ssl: DriverTls } {
  const { url: plain, tls } = tlsOf(url);
  if (!URL.canParse(plain)) return { connectionString: plain, ssl: tls };
  const u = new URL(plain);
  const host = param(u, "host");
  return { connectionString: withParam(u, ["host", "sslnegotiation"], host === undefined ? undefined : ["host", host]).toString(), ssl: tls };
}

/** The same database through a Unix socket in `dir` (a server that listens on both). */
export function overSocket(url: string, dir: string): string {
  return withParam(new URL(url), ["host"], ["host", dir]).toString();
}

/**
 * The URL without the parameters named in `drop`, and with `add` (percent-encoded), the others
 * left as written (URLSearchParams would write them again, form-encoded).
 */
function withParam(u: URL, drop: string[], add?: [string, string]): URL {
  const kept = u.search
    .slice(1)
    .split("&")
    .filter((pair) => pair !== "" && !drop.includes(safeDecode(pair.split("=")[0]!)));
  if (add) kept.push(`${add[0]}=${encodeURIComponent(add[1])}`);
  const out = new URL(u);
  out.search = kept.length > 0 ? `?${kept.join("&")}` : "";
  return out;
}
