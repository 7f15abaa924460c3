import { isIP } from "node:net";
import { ipv4, ipv6Groups } from "../../core/ip-address.ts";

export interface SensorSpec {
  url: string;
  method?: "GET" | "HEAD" | "POST";
  expect_status?: number;
  pointer?: string;
  equals?: unknown;
  interval_s?: number;
  max_polls?: number;
}

export const SENSOR_DEFAULTS = { method: "GET", expect_status: 200, interval_s: 60, max_polls: 10 } as const;

/**
 * Whether a sensor may reach `address` (an IP literal). Link-local addresses, where cloud
 * metadata services live (169.254.169.254), are refused unless SIGNALBOX_SENSOR_ALLOW names
 * them (CIDRs or addresses, comma-separated). An IPv6 address that carries an IPv4 one is
 * judged as that IPv4 address: the URL parser writes [::ffff:169.254.169.254] as
 * ::ffff:a9fe:a9fe, and either reaches the metadata service.
 */
export function addressAllowed(address: string, allow: string[]): boolean {
  if (allow.some((entry) => inCidr(address, entry))) return true;
  if (isIP(address) === 4) return !inCidr(address, "169.254.0.0/16");
  if (isIP(address) === 6) {
    const groups = ipv6Groups(address);
    const embedded = embeddedIpv4(groups);
    if (embedded !== undefined) return addressAllowed(embedded, allow);
    return (groups[0]! & 0xffc0) !== 0xfe80; // fe80::/10
  }
  return true;
}

/**
 * The IPv4 address in an IPv4-mapped (::ffff:0:0/96) or IPv4-compatible (::/96, deprecated)
 * IPv6 address, however it is written. `::` and `::1` come out as 0.0.0.0 and 0.0.0.1, which
 * the IPv4 rules allow as the IPv6 ones would.
 */
function embeddedIpv4(groups: number[]): string | undefined {
  if (groups.slice(0, 5).some((g) => g !== 0) || (groups[5] !== 0 && groups[5] !== 0xffff)) return undefined;
  const [hi, lo] = [groups[6]!, groups[7]!];
  return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join(".");
}

function inCidr(address: string, cidr: string): boolean {
  const [base, bitsText] = cidr.split("/");
  if (!base) return false;
  if (bitsText === undefined) return base === address;
  if (isIP(address) !== 4 || isIP(base) !== 4) return false;
  const bits = Number(bitsText);
  if (!Number.isInteger(bits) || bits < 0 || bits > 32) return false;
  const mask = bits === 0 ? 0 : (~0 << (32 - bits)) >>> 0;
  return (ipv4(address) & mask) >>> 0 === (ipv4(base) & mask) >>> 0;
}

/** Deep equality for JSON values. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && jsonEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}
