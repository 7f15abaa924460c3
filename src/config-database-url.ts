import fs from "node:fs";

/**
 * A database URL's query parameters as libpq reads them. Managed providers hand out URLs with
 * libpq's parameters (Neon's carry `channel_binding=require`; others keepalives, sslcrl...), and
 * postgres.js sends any parameter it does not know to the server as a setting, which refuses it:
 * every start failed on "unrecognized configuration parameter". Each of libpq's parameters that
 * neither driver takes as it is, is here: applied (src/db/connection-url.ts), dropped (a
 * client-side knob that changes no guarantee), or refused at start with the reason (a guarantee
 * neither driver can give, or a source of settings signalbox does not read).
 */

/**
 * A parameter as libpq reads it: its last value when given twice (`?sslmode=require&sslmode=verify-full`
 * is verify-full), decoded %XX only (URLSearchParams would read `+` as a space).
 */
export function urlParam(u: URL, name: string): string | undefined {
  let value: string | undefined;
  for (const pair of u.search.slice(1).split("&")) {
    const at = pair.indexOf("=");
    const key = at < 0 ? pair : pair.slice(0, at);
    if (safeDecode(key) === name) value = at < 0 ? "" : safeDecode(pair.slice(at + 1));
  }
  return value;
}

export function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * The sslmode values a URL may give. Not `allow` nor `prefer`: they fall back to plain text,
 * which graphile-worker's driver cannot do.
 */
const SSL_MODES = ["disable", "require", "verify-ca", "verify-full"];

/** ssl_min_protocol_version / ssl_max_protocol_version: libpq's names are Node's. */
export const TLS_VERSIONS = ["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"] as const;

/**
 * Read or dropped here, never sent to the server: client-side knobs that change no guarantee.
 * Our connections have TCP keep-alive on and name themselves; TLS compression is gone from
 * OpenSSL; neither driver does GSSAPI (a server that demands it refuses with its own message);
 * SNI is always sent; hosts are tried in order; a password file is not needed when the URL has
 * the password.
 */
export const DROPPED_PARAMS = [
  "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
  "fallback_application_name", "sslcompression", "sslsni", "sslkeylogfile",
  "krbsrvname", "gsslib", "gssdelegation", "load_balance_hosts", "passfile",
];

const tlsVersion = (v: string) => (TLS_VERSIONS.includes(v as never) ? undefined : `use one of ${TLS_VERSIONS.join(", ")}`);

/** Each value a parameter may have that no driver here can honour, and why (undefined: this value goes). */
const REFUSED: Record<string, (value: string, u: URL) => string | undefined> = {
  sslmode: (v) => (SSL_MODES.includes(v) ? undefined : "use disable, require (TLS, the certificate not checked), verify-ca or verify-full"),
  channel_binding: (v) =>
    v === "require" ? "signalbox's Postgres driver cannot bind SCRAM to TLS: remove it, and use sslmode=verify-full (the server's certificate checked) to be sure of the server" : undefined,
  gssencmode: (v) => (v === "require" ? "neither of signalbox's Postgres drivers does GSSAPI encryption: use sslmode" : undefined),
  sslcertmode: (v) => (v === "require" ? "whether the server asked for the client certificate cannot be checked: remove it (sslcert and sslkey are sent)" : undefined),
  ssl_min_protocol_version: tlsVersion,
  ssl_max_protocol_version: tlsVersion,
  target_session_attrs: (v) =>
    ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"].includes(v) ? undefined : "use any, read-write, read-only, primary, standby or prefer-standby",
  require_auth: () => "the authentication methods the server may ask for cannot be limited: remove it",
  requirepeer: () => "the server process's user cannot be checked: remove it",
  // libpq reads it only when the URL has no password.
  passfile: (_v, u) => (u.password || urlParam(u, "password") ? undefined : "a password file is not read: give the password in the URL"),
  service: () => "pg_service.conf is not read: give the connection's parameters in the URL",
  hostaddr: () => "give the address as the URL's host",
  // libpq's lists (a host after another) are not followed: node-postgres connects to one host.
  host: (v) => (v.includes(",") ? "give one host" : undefined),
  port: (v) => (/^\d{1,5}$/.test(v) && Number(v) <= 65535 ? undefined : "give one port number"),
  // PostgreSQL 18's libpq: both drivers speak protocol 3.0.
  min_protocol_version: (v) => (v === "3.0" ? undefined : "signalbox's Postgres drivers speak protocol 3.0 only: remove it"),
  max_protocol_version: (v) => (["3.0", "3.2", "latest"].includes(v) ? undefined : "use 3.0, 3.2 or latest"),
  // libpq 16 refuses a weaker sslmode with it: the system's CAs are only worth a checked host name.
  sslrootcert: (v, u) =>
    v === "system" ? (![undefined, "verify-full"].includes(sslModeOf(u)) ? "give sslmode=verify-full with it (in the URL, or PGSSLMODE), as libpq requires" : undefined) : unreadable(v, u),
  sslcert: (v, u) => (urlParam(u, "sslcertmode") === "disable" ? undefined : unreadable(v, u)),
  sslkey: (v, u) => (urlParam(u, "sslcert") === undefined || urlParam(u, "sslcertmode") === "disable" ? undefined : unreadable(v, u)),
  sslcrl: (v, u) => unreadable(v, u),
  sslcrldir: (v, u) => unreadable(v, u),
};

/**
 * Why a certificate, key or revocation file (or directory) the URL names cannot be read, when its
 * TLS would use it: said at start, rather than as a connection error naming neither the file nor
 * where it came from (a path from PGSSLROOTCERT is not even in the URL).
 */
function unreadable(path: string, u: URL): string | undefined {
  if (tlsModeOf(u) === "disable") return undefined; // no TLS: none is read
  try {
    fs.accessSync(path, fs.constants.R_OK);
    return undefined;
  } catch (err) {
    return `it cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})`;
  }
}

/**
 * The TLS a URL gets (src/db/connection-url.ts tlsOf): its sslmode; with none, verify-full for
 * sslrootcert=system, else disable (`prefer` is not supported). Never TLS on a Unix socket
 * (`?host=/dir`), whatever sslmode says, as libpq.
 */
export function tlsModeOf(u: URL): string {
  if (urlParam(u, "host")?.startsWith("/")) return "disable";
  return sslModeOf(u) ?? (urlParam(u, "sslrootcert") === "system" ? "verify-full" : "disable");
}

/** The sslmode a URL gives; or, when none, libpq's older requiressl=1 or node-postgres's `ssl=true|false` (undefined: none of them). */
export function sslModeOf(u: URL): string | undefined {
  const mode = urlParam(u, "sslmode");
  if (mode !== undefined) return mode;
  // libpq reads the first character only.
  if (urlParam(u, "requiressl")?.startsWith("1")) return "require";
  const ssl = urlParam(u, "ssl");
  if (ssl === undefined) return undefined;
  return ssl === "false" || ssl === "0" ? "disable" : "require";
}

/** Why a URL cannot be used as written, one reason per parameter (empty: it can). */
export function refusedParams(url: string): string[] {
  if (!URL.canParse(url)) return [];
  const u = new URL(url);
  const reasons: string[] = [];
  for (const [name, refuse] of Object.entries(REFUSED)) {
    const value = urlParam(u, name);
    const why = value === undefined ? undefined : refuse(value, u);
    if (why !== undefined) reasons.push(`${name}=${value} is not supported: ${why}`);
  }
  return reasons;
}

/**
 * libpq's environment variables for the TLS and authentication parameters, by the parameter each
 * stands for. libpq reads them where the URL does not say, and managed providers' guides set them
 * beside a plain URL (`PGSSLMODE=verify-full`, `PGSSLROOTCERT=/etc/ssl/ca.pem`): unread,
 * signalbox connected in plain text where psql beside it used TLS. Those asking for a guarantee
 * neither driver can give (PGCHANNELBINDING=require...) are refused as the URL's would be.
 */
const LIBPQ_ENVIRONMENT = {
  PGSSLMODE: "sslmode",
  PGREQUIRESSL: "requiressl",
  PGSSLROOTCERT: "sslrootcert",
  PGSSLCERT: "sslcert",
  PGSSLKEY: "sslkey",
  PGSSLCERTMODE: "sslcertmode",
  PGSSLCRL: "sslcrl",
  PGSSLCRLDIR: "sslcrldir",
  PGSSLMINPROTOCOLVERSION: "ssl_min_protocol_version",
  PGSSLMAXPROTOCOLVERSION: "ssl_max_protocol_version",
  PGCHANNELBINDING: "channel_binding",
  PGGSSENCMODE: "gssencmode",
  PGREQUIREAUTH: "require_auth",
  PGREQUIREPEER: "requirepeer",
} as const;

/** Parameters that say whether to use TLS: a URL giving any of them is not overridden by PGSSLMODE or PGREQUIRESSL. */
const MODE_PARAMS = ["sslmode", "requiressl", "ssl"];

/**
 * The URL with libpq's environment variables (LIBPQ_ENVIRONMENT) added as the parameters they
 * stand for, where the URL has none of its own (the URL wins, as in libpq; an empty variable is
 * taken as unset, where libpq would refuse it); and why a variable so read cannot be used, named
 * by the variable (it is then not added). Only for a URL given: the embedded Postgres is reached
 * through its socket, never TLS.
 */
export function withLibpqEnvironment(url: string, env: Record<string, string | undefined>): { url: string; refused: string[] } {
  if (!URL.canParse(url)) return { url, refused: [] };
  const u = new URL(url);
  const given = (param: string) => urlParam(u, param) !== undefined;
  const read = Object.entries(LIBPQ_ENVIRONMENT).filter(([name, param]) => {
    if (!env[name] || given(param)) return false;
    return !((param === "sslmode" || param === "requiressl") && MODE_PARAMS.some(given));
  });
  const adding = (entries: typeof read) => {
    const out = new URL(u);
    const added = entries.map(([name, param]) => `${param}=${encodeURIComponent(env[name]!)}`);
    if (added.length > 0) out.search = `${out.search ? `${out.search}&` : "?"}${added.join("&")}`;
    return out;
  };
  // Each judged with the others read (PGSSLROOTCERT=system and PGSSLMODE=require together are refused).
  const all = adding(read);
  const refused: string[] = [];
  const kept = read.filter(([name, param]) => {
    const why = REFUSED[param]?.(env[name]!, all);
    if (why !== undefined) refused.push(`${name}: ${env[name]} is not supported: ${why}`);
    return why === undefined;
  });
  return { url: kept.length > 0 ? adding(kept).toString() : url, refused };
}
