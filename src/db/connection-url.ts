import fs from "node:fs";
import type { ConnectionOptions } from "node:tls";
import postgres from "postgres";
import { DROPPED_PARAMS, safeDecode, tlsModeOf, urlParam, type TLS_VERSIONS } from "../config-database-url.ts";

/**
 * TLS for one driver: none, or the options of Node's tls.connect. The same for postgres.js
 * (the API's pool, LISTEN, our migrations) and node-postgres (graphile-worker).
 */
export type DriverTls = false | ConnectionOptions;

/**
 * Parameters read here and never passed on: the TLS ones (libpq's, and node-postgres's `ssl`),
 * and those neither driver may be given (src/config-database-url.ts): postgres.js would send them
 * to the server as settings, which refuses them.
 */
const CLIENT_PARAMS = [
  "sslmode", "requiressl", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslcertmode", "sslcrl", "sslcrldir",
  "ssl_min_protocol_version", "ssl_max_protocol_version", "ssl", "uselibpqcompat", "channel_binding", "gssencmode",
  "min_protocol_version", "max_protocol_version",
  ...DROPPED_PARAMS,
];

/**
 * The TLS a URL asks for, as libpq reads sslmode, sslrootcert, sslcert and sslkey, for both
 * drivers alike. Left to themselves they disagree: node-postgres checks the certificate for
 * `require` against Node's own CAs (a managed Postgres whose CA is not among them refused every
 * start), and postgres.js reads no certificate file (it sent sslrootcert to the server as a
 * setting) and ignores the CA given.
 *  - require: encrypted, the certificate not checked; with sslrootcert, as verify-ca;
 *  - verify-ca: the certificate signed by sslrootcert's CA (Node's CAs without it), any host name;
 *  - verify-full: that, and the host name; sslrootcert=system: Node's CAs.
 * And as libpq: sslpassword unlocks sslkey, sslcertmode=disable sends no client certificate,
 * sslcrl / sslcrldir revoke certificates, ssl_min/max_protocol_version bound the TLS version.
 */
export function tlsOf(url: string): { url: string; tls: DriverTls } {
  if (!URL.canParse(url)) return { url, tls: false };
  const u = new URL(url);
  const system = urlParam(u, "sslrootcert") === "system";
  const mode = tlsModeOf(u);
  const file = (name: string) => {
    const path = urlParam(u, name);
    return path && path !== "system" ? fs.readFileSync(path, "utf8") : undefined;
  };
  let tls: DriverTls = false;
  if (mode !== "disable") {
    const ca = file("sslrootcert");
    const checked = mode === "verify-full" || mode === "verify-ca" || ca !== undefined || system;
    const clientCert = urlParam(u, "sslcert") !== undefined && urlParam(u, "sslcertmode") !== "disable";
    const crl = [...(urlParam(u, "sslcrl") ? [file("sslcrl")!] : []), ...crlDirectory(urlParam(u, "sslcrldir"))];
    const version = (name: string) => urlParam(u, name) as (typeof TLS_VERSIONS)[number] | undefined;
    const [minVersion, maxVersion] = [version("ssl_min_protocol_version"), version("ssl_max_protocol_version")];
    tls = {
      ...(ca !== undefined ? { ca } : {}),
      ...(clientCert ? { cert: file("sslcert"), key: file("sslkey"), passphrase: urlParam(u, "sslpassword") } : {}),
      ...(crl.length > 0 ? { crl } : {}),
      ...(minVersion ? { minVersion } : {}),
      ...(maxVersion ? { maxVersion } : {}),
      rejectUnauthorized: checked,
      // verify-ca (and require with a CA): any name the certificate carries.
      ...(checked && mode !== "verify-full" && !system ? { checkServerIdentity: () => undefined } : {}),
    };
  }
  let plain = withParam(withAuthorityParams(u), CLIENT_PARAMS);
  // Once, with libpq's value (the last); `any`, libpq's default, not at all: postgres.js reads the
  // first and refuses the word.
  const attrs = urlParam(plain, "target_session_attrs");
  if (attrs !== undefined) plain = withParam(plain, ["target_session_attrs"], attrs === "any" ? undefined : ["target_session_attrs", attrs]);
  return { url: plain.toString(), tls };
}

/**
 * The URL with the host, port, dbname, user and password libpq reads from its query (over the
 * URL's own: `postgresql:///db?host=h&port=5433`, as libpq's docs write them) moved where both
 * drivers read them: postgres.js would send them to the server as settings, and connect to the
 * URL's own host and port. A socket directory (`?host=/dir`) stays: each driver's target reads it.
 */
function withAuthorityParams(u: URL): URL {
  const [host, port, dbname, user, password] = ["host", "port", "dbname", "user", "password"].map((name) => urlParam(u, name) || undefined);
  const out = new URL(u);
  const tcpHost = host?.startsWith("/") ? undefined : host;
  // A URL with no host can carry no port nor user (WHATWG URL): libpq's default host is local.
  if (tcpHost !== undefined) out.hostname = tcpHost.includes(":") ? `[${tcpHost}]` : tcpHost;
  else if (out.hostname === "" && (port ?? user ?? password) !== undefined) out.hostname = "localhost";
  if (port !== undefined) out.port = port;
  // encodeURI, not encodeURIComponent: node-postgres reads the path with decodeURI (a `+` or `$`
  // encoded would stay encoded); a `?` or `#` must be encoded, and only postgres.js reads those back.
  if (dbname !== undefined) out.pathname = `/${encodeURI(dbname).replace(/[?#]/g, encodeURIComponent)}`;
  if (user !== undefined) out.username = encodeURIComponent(user);
  if (password !== undefined) out.password = encodeURIComponent(password);
  return withParam(out, ["port", "dbname", "user", "password", ...(tcpHost !== undefined ? ["host"] : [])]);
}

/** Every file in an sslcrldir (libpq's hashed directory: a CRL in each). */
function crlDirectory(dir: string | undefined): string[] {
  if (!dir) return [];
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => fs.readFileSync(`${dir}/${e.name}`, "utf8"));
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
  const dir = urlParam(u, "host");
  if (!dir?.startsWith("/")) return { url: plain, ssl: tls };
  return { url: withParam(u, ["host"]).toString(), path: `${dir}/.s.PGSQL.${u.port || "5432"}`, ssl: tls };
}

/**
 * A postgres.js client for a URL, its socket and TLS always the URL's (postgresJsTarget): every
 * client of ours opens through here, so none can forget the certificate check a URL asks for.
 */
export function postgresJs<T extends Record<string, postgres.PostgresType> = {}>(url: string, options: Omit<postgres.Options<T>, "path" | "ssl">) {
  const target = postgresJsTarget(url);
  return postgres<T>(target.url, { ...options, ...hostAndDatabase(target.url), path: target.path, ssl: target.ssl });
}

/**
 * What postgres.js reads wrong from a URL, given as options: the database is the path as
 * written (it never decodes it: `my%20db`), and an IPv6 host is cut at its first colon (`[`).
 * A URL with several hosts (no WHATWG URL) is left to postgres.js.
 */
function hostAndDatabase(url: string): { host?: string; port?: number; database?: string } {
  if (!URL.canParse(url)) return {};
  const u = new URL(url);
  // As arrays (postgres.js's own form for its hosts, which its types do not say): a string it splits at colons.
  const host = (h: string, port: number) => ({ host: [h] as unknown as string, port: [port] as unknown as number });
  return {
    ...(u.hostname ? host(u.hostname.replace(/^\[(.*)\]$/, "$1"), Number(u.port || 5432)) : {}),
    ...(u.pathname.length > 1 ? { database: safeDecode(u.pathname.slice(1)) } : {}),
  };
}

/**
 * node-postgres's options for a URL (it reads `?host=/dir` itself, `+` as a space: it gets %2B).
 * TLS: see tlsOf. Without `sslnegotiation` (PostgreSQL 17's direct TLS, which postgres.js
 * speaks): node-postgres would read it as `ssl=true`, checked against Node's CAs whatever sslmode
 * says, and negotiates TLS the usual way, which every server accepts.
 */
export function nodePostgresTarget(url: string): { connectionString: string; ssl: DriverTls; sslnegotiation: "postgres" } {
  const { url: plain, tls } = tlsOf(url);
  // Said, so that node-postgres does not read PGSSLNEGOTIATION itself (`direct` without TLS throws).
  const sslnegotiation = "postgres";
  if (!URL.canParse(plain)) return { connectionString: plain, ssl: tls, sslnegotiation };
  const u = new URL(plain);
  const host = urlParam(u, "host");
  return { connectionString: withParam(u, ["host", "sslnegotiation"], host === undefined ? undefined : ["host", host]).toString(), ssl: tls, sslnegotiation };
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
