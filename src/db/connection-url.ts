/**
 * A database URL may name a Unix socket the way libpq and node-postgres (graphile-worker's
 * driver) read it: `?host=/path/to/dir` beside the port, the socket being
 * `<dir>/.s.PGSQL.<port>`. postgres.js takes a socket only as its `path` option (it would send
 * `host` to the server as a setting, which refuses it): these are the options that make the
 * same URL reach the same socket through it.
 */
export function postgresJsTarget(url: string): { url: string; path?: string } {
  if (!URL.canParse(url)) return { url };
  const u = new URL(url);
  const dir = u.searchParams.get("host");
  if (!dir?.startsWith("/")) return { url };
  u.searchParams.delete("host");
  return { url: u.toString(), path: `${dir}/.s.PGSQL.${u.port || "5432"}` };
}

/** The same database through a Unix socket in `dir` (a server that listens on both). */
export function overSocket(url: string, dir: string): string {
  const u = new URL(url);
  u.searchParams.set("host", dir);
  return u.toString();
}
