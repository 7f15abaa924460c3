/**
 * The endpoint a callback URL names: host[:port] as the URL parser normalises it (lower case,
 * default port dropped). Never the userinfo, path or query, which may carry credentials: this
 * is what delivery records, listings and log lines show.
 */
export function callbackHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return "";
  }
}
