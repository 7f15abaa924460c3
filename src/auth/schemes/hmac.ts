// Shared primitives for webhook signature verification: HMAC over raw bytes,
// strict decoders (null on anything non-canonical, never an exception),
// constant-time comparison and the single-header / timestamp rules.
import { createHmac, timingSafeEqual } from "node:crypto";
import type { SignatureHeaders, VerifyResult } from "./signature-auth.ts";

/** Length of an HMAC-SHA256 MAC in bytes. */
export const MAC_BYTES = 32;
/** Default timestamp tolerance (seconds, both directions). */
export const DEFAULT_TOLERANCE_S = 300;
/** Upper bound on any header value we look at; longer values are rejected before parsing. */
export const MAX_HEADER_CHARS = 4096;

export function fail(reason: string): VerifyResult {
  return { ok: false, reason };
}

/** HMAC-SHA256 of `prefix` (UTF-8; ASCII in practice) followed by the raw body bytes. */
export function hmacSha256(key: Uint8Array, prefix: string, body: Uint8Array): Buffer {
  const h = createHmac("sha256", key);
  if (prefix.length > 0) h.update(prefix, "utf8");
  h.update(body);
  return h.digest();
}

/** Constant-time equality; unequal lengths are simply unequal (the MAC length is public). */
export function safeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  return timingSafeEqual(a, b);
}

const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Strict standard base64 (RFC 4648 §4, with padding): the alphabet, length and padding are
 * checked and the decoded bytes must re-encode to exactly the input (rejects non-zero trailing
 * bits). Returns null for anything else, including the empty string.
 */
export function decodeBase64Strict(s: string): Buffer | null {
  if (s.length === 0 || !BASE64_RE.test(s)) return null;
  const buf = Buffer.from(s, "base64");
  return buf.toString("base64") === s ? buf : null;
}

const HEX_LOWER_RE = /^(?:[0-9a-f]{2})+$/;
const HEX_ANY_RE = /^(?:[0-9a-fA-F]{2})+$/;

/** Strict hex of exactly `bytes` bytes; lower-case only unless `allowUpper`. */
export function decodeHexStrict(s: string, bytes: number, allowUpper = false): Buffer | null {
  if (s.length !== bytes * 2) return null;
  if (!(allowUpper ? HEX_ANY_RE : HEX_LOWER_RE).test(s)) return null;
  return Buffer.from(s, "hex");
}

/** Strict base64 of exactly `bytes` bytes. */
export function decodeBase64Mac(s: string, bytes: number = MAC_BYTES): Buffer | null {
  if (s.length !== Math.ceil(bytes / 3) * 4) return null;
  const buf = decodeBase64Strict(s);
  return buf !== null && buf.byteLength === bytes ? buf : null;
}

export type HeaderLookup = { ok: true; value: string } | { ok: false; reason: string };

/**
 * Exactly one value of a header, bounded in length. Absent, repeated or oversized headers are
 * failures (a repeated header is never merged or picked from).
 */
export function singleHeader(headers: SignatureHeaders, name: string, max = MAX_HEADER_CHARS): HeaderLookup {
  const values = headers(name);
  if (!Array.isArray(values) || values.length === 0) return { ok: false, reason: `missing header ${name}` };
  if (values.length > 1) return { ok: false, reason: `duplicate header ${name}` };
  const value = values[0];
  if (typeof value !== "string") return { ok: false, reason: `missing header ${name}` };
  if (value.length > max) return { ok: false, reason: `oversized header ${name}` };
  return { ok: true, value };
}

const TIMESTAMP_RE = /^(?:0|[1-9][0-9]{0,14})$/;

/** Canonical unix-seconds timestamp: digits only, no sign, no leading zero, no fraction. */
export function parseTimestamp(s: string): number | null {
  return TIMESTAMP_RE.test(s) ? Number(s) : null;
}

/** The effective tolerance, or null when the configured value is unusable (fail closed). */
export function toleranceOf(tolerance_s: number | undefined): number | null {
  if (tolerance_s === undefined) return DEFAULT_TOLERANCE_S;
  if (typeof tolerance_s !== "number" || !Number.isFinite(tolerance_s) || tolerance_s < 0) return null;
  return tolerance_s;
}

/** Checks |now - ts| <= tolerance (inclusive boundary); returns a failure reason or null. */
export function checkTimestamp(ts: number, nowSeconds: number, tolerance_s: number | undefined): string | null {
  const tol = toleranceOf(tolerance_s);
  if (tol === null) return "invalid tolerance";
  if (typeof nowSeconds !== "number" || !Number.isFinite(nowSeconds)) return "invalid clock";
  if (ts < nowSeconds - tol) return "timestamp too old";
  if (ts > nowSeconds + tol) return "timestamp too new";
  return null;
}

/** Secrets used as their literal UTF-8 bytes (GitHub, Stripe, Shopify, Slack, hmac-sha256). Empty ones are skipped. */
export function utf8Keys(secrets: readonly unknown[]): Buffer[] {
  const keys: Buffer[] = [];
  for (const s of secrets) if (typeof s === "string" && s.length > 0) keys.push(Buffer.from(s, "utf8"));
  return keys;
}

/** True when the MAC of `prefix + body` under any key equals any candidate (all 32 bytes). */
export function anyMatch(keys: readonly Uint8Array[], prefix: string, body: Uint8Array, candidates: readonly Uint8Array[]): boolean {
  for (const key of keys) {
    const mac = hmacSha256(key, prefix, body);
    for (const c of candidates) if (safeEqual(mac, c)) return true;
  }
  return false;
}
