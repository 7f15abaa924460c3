import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { BadRequestError } from "../../core/errors.ts";
import { addressAllowed } from "./sensor-spec.ts";

const refused = (detail: string) => new BadRequestError(detail, [{ path: "/sensor/url", message: detail }]);

/** At wait creation: an http(s) URL whose host, if an IP literal, is allowed. */
export async function checkSensorTarget(url: string, allow: string[]): Promise<void> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw refused("must be an absolute URL");
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") throw refused("must be an http(s) URL");
  const host = parsed.hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) && !addressAllowed(host, allow)) throw refused(`${host} is a link-local address; allow it with SIGNALBOX_SENSOR_ALLOW`);
}

/** At each poll: every address the host resolves to must be allowed (names can change). */
export async function sensorTargetAllowed(url: string, allow: string[]): Promise<boolean> {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
  const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
  return addresses.every((a) => addressAllowed(a, allow));
}
