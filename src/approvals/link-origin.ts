import { BadRequestError } from "../core/errors.ts";

/** Hosts a request may name when SIGNALBOX_PUBLIC_URL is unset and no allow-list is configured: this machine. */
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]"]);

/**
 * Where approval links point. Links are mailed to people, so their origin must never be the
 * choice of whoever sent the request: SIGNALBOX_PUBLIC_URL when set; else the request's own
 * origin, but only for a host on SIGNALBOX_LINK_HOSTS (by default, loopback names only).
 */
export function linkOrigin(config: { SIGNALBOX_PUBLIC_URL?: string; SIGNALBOX_LINK_HOSTS: string[] }, requestUrl: string): string {
  if (config.SIGNALBOX_PUBLIC_URL) return config.SIGNALBOX_PUBLIC_URL;
  const url = new URL(requestUrl);
  const allowed = config.SIGNALBOX_LINK_HOSTS.length > 0 ? config.SIGNALBOX_LINK_HOSTS.some((h) => h.toLowerCase() === url.hostname || h.toLowerCase() === url.host) : LOOPBACK.has(url.hostname);
  if (!allowed) {
    throw new BadRequestError(`links cannot be made for host '${url.host}': set SIGNALBOX_PUBLIC_URL, or list the host in SIGNALBOX_LINK_HOSTS`, [
      { path: "", message: "the request's host is not one links may use" },
    ]);
  }
  return url.origin;
}
