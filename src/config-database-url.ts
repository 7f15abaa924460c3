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
};

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
 * libpq's environment variables for the TLS parameters, by the parameter each stands for. libpq
 * reads them where the URL does not say, and managed providers' guides set them beside a plain
 * URL (`PGSSLMODE=verify-full`, `PGSSLROOTCERT=/etc/ssl/ca.pem`): read otherwise, signalbox
 * connected in plain text to a server that allowed it while psql beside it used TLS.
 */
export const TLS_ENVIRONMENT = {
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
} as const;

/** Parameters that say whether to use TLS: a URL giving any of them is not overridden by PGSSLMODE or PGREQUIRESSL. */
const MODE_PARAMS = ["sslmode", "requiressl", "ssl"];

/**
 * The URL with libpq's TLS environment variables (TLS_ENVIRONMENT) added as the parameters they
 * stand for, where the URL has none of its own (the URL wins, as in libpq; an empty variable is
 * unset); and why a variable so read cannot be used, named by the variable. Only for a URL
 * given: the embedded Postgres is reached through its socket, never TLS.
 */
export function withTlsEnvironment(url: string, env: Record<string, string | undefined>): { url: string; refused: string[] } {
  if (!URL.canParse(url)) return { url, refused: [] };
  const u = new URL(url);
  const given = (param: string) => urlParam(u, param) !== undefined;
  const added: string[] = [];
  const refused: string[] = [];
  for (const [name, param] of Object.entries(TLS_ENVIRONMENT)) {
    const value = env[name];
    if (!value || given(param) || ((param === "sslmode" || param === "requiressl") && MODE_PARAMS.some(given))) continue;
    const why = REFUSED[param]?.(value, u);
    if (why !== undefined) refused.push(`${name}: ${name}=${value} is not supported: ${why}`);
    else added.push(`${param}=${encodeURIComponent(value)}`);
  }
  if (added.length > 0) u.search = `${u.search ? `${u.search}&` : "?"}${added.join("&")}`;
  return { url: added.length > 0 ? u.toString() : url, refused };
}
