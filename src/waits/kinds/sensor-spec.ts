import { isIP } from "node:net";

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
 * them (CIDRs or addresses, comma-separated).
 */
export function addressAllowed(address: string, allow: string[]): boolean {
  if (allow.some((entry) => inCidr(address, entry))) return true;
  if (isIP(address) === 4) return !inCidr(address, "169.254.0.0/16");
  if (isIP(address) === 6) {
    const lower = address.toLowerCase();
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
    if (mapped) return addressAllowed(mapped[1]!, allow);
    return !/^fe[89ab]/.test(lower); // fe80::/10
  }
  return true;
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

function ipv4(a: string): number {
  return a.split(".").reduce((n, part) => ((n << 8) | Number(part)) >>> 0, 0);
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
