import { postgresJsTarget } from "./connection-url.ts";

/**
 * A failure to reach or log in to the database at a configured URL, as one line that names the
 * setting to fix (the URL's host and port, never its password). Undefined for other errors.
 */
export function describeConnectError(err: unknown, url: string, setting: string): string | undefined {
  const e = err as { code?: string; errors?: Array<{ code?: string }> };
  const code = e?.code ?? e?.errors?.[0]?.code;
  let where = "the database";
  try {
    // Where the drivers go: libpq's query parameters (host, port, dbname) taken as they take them.
    const target = postgresJsTarget(url);
    const u = new URL(target.url);
    where = target.path ? `${target.path} (database ${u.pathname.slice(1)})` : `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    // the configuration check refuses a malformed URL before anything connects
  }
  const reason: Record<string, string> = {
    ECONNREFUSED: `nothing accepts connections at ${where} (connection refused)`,
    ENOENT: `there is no socket at ${where}`,
    ENOTFOUND: `the host of ${where} is not found`,
    EAI_AGAIN: `the host of ${where} cannot be resolved now`,
    ETIMEDOUT: `${where} does not answer (timed out)`,
    EHOSTUNREACH: `${where} is unreachable`,
    ENETUNREACH: `${where} is unreachable`,
    "28P01": `the password for ${where} is refused`,
    "28000": `the database at ${where} refuses this user`,
    "3D000": `the database ${where} does not exist`,
  };
  const why = code ? reason[code] : undefined;
  return why ? `cannot connect to ${setting}: ${why}: check ${setting}, or start the database` : undefined;
}
