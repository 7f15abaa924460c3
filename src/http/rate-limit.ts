import { BlockList, isIP } from "node:net";
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context, MiddlewareHandler } from "hono";
import { ipv6Groups } from "../core/ip-address.ts";
import { problemResponse } from "./problem.ts";

export interface Rate {
  /** Requests a second, sustained. */
  perS: number;
  /** Requests allowed at once before the rate applies. */
  burst: number;
}

/**
 * Token buckets by key, at most `maxKeys` of them: keys are the client's choice (addresses,
 * signal names), so past the bound the longest-idle bucket is dropped (it was full anyway, or
 * nearly: a dropped bucket starts full again).
 */
export class TokenBuckets {
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #rate: Rate;
  readonly #maxKeys: number;

  constructor(rate: Rate, maxKeys = 10_000) {
    this.#rate = rate;
    this.#maxKeys = maxKeys;
  }

  /** Takes a token for `key`: 0 when allowed, else the seconds until one is there. */
  take(key: string, nowMs: number): number {
    const bucket = this.#buckets.get(key) ?? { tokens: this.#rate.burst, at: nowMs };
    this.#buckets.delete(key); // re-inserted last: the Map's order is idleness
    bucket.tokens = Math.min(this.#rate.burst, bucket.tokens + ((nowMs - bucket.at) / 1000) * this.#rate.perS);
    bucket.at = nowMs;
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    this.#buckets.set(key, bucket);
    if (this.#buckets.size > this.#maxKeys) this.#buckets.delete(this.#buckets.keys().next().value!);
    return allowed ? 0 : (1 - bucket.tokens) / this.#rate.perS;
  }

  get size(): number {
    return this.#buckets.size;
  }
}

/** Addresses and CIDRs (`10.0.0.0/8`, `::1`) of the proxies whose X-Forwarded-For is believed. */
export function proxyList(entries: string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = "", bits] = entry.split("/");
    const type = isIP(address) === 6 ? "ipv6" : "ipv4";
    if (bits === undefined) list.addAddress(address, type);
    else list.addSubnet(address, Number(bits), type);
  }
  return list;
}

/** Whether `address` is one of the trusted proxies (a malformed address is not). */
export const isTrusted = (proxies: BlockList, address: string) => isIP(address) !== 0 && proxies.check(address, isIP(address) === 6 ? "ipv6" : "ipv4");

/**
 * Who sent the request: the peer's address, or, when the peer is a trusted proxy, the nearest
 * address in X-Forwarded-For that is not one (a client can prepend anything to the header;
 * only what trusted proxies appended counts).
 */
export function clientAddress(c: Context, proxies: BlockList): string {
  let address = getConnInfo(c).remote.address ?? "unknown";
  if (!isTrusted(proxies, address)) return address;
  const hops = (c.req.header("x-forwarded-for") ?? "").split(",").map((h) => h.trim()).filter(Boolean);
  while (hops.length > 0 && isTrusted(proxies, address)) address = hops.pop()!;
  return address;
}

/**
 * The key a client address is limited by. An IPv6 address by its /64: one host, home or VM is
 * given a whole /64, so keyed by the full address a single client would have 2^64 buckets. An
 * IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, a dual-stack socket's IPv4 peer) by its IPv4
 * address, the same client either way. Anything else (IPv4, "unknown") as it is.
 */
export function addressKey(address: string): string {
  if (isIP(address) !== 6) return address;
  const groups = ipv6Groups(address);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join(".");
  }
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(":")}::/64`;
}

export interface RateLimitOptions {
  /** Per client address, over every public request; null: off. */
  perAddress: Rate | null;
  /** Per signal type, over anonymous intake to it from all addresses together; null: off. */
  perSignalType: Rate | null;
  /**
   * Per signal type, the intake answers that refuse an anonymous sender (any 4xx), from all
   * addresses together. Past it, one that records nothing (401: no valid signature, 404: no such
   * type) becomes a late 429, and one that was recorded (409 not waiting, 422…) is answered as it
   * is but as late, so a flood of rejections slows to one request a second per connection. An
   * accepted signal is never counted nor delayed. null: off.
   */
  perSignalTypeRefusals?: Rate | null;
  trustedProxies: string[];
  /** The signal name when the request is intake, "" for another public request, null when the limits do not apply. */
  classify(method: string, path: string): string | null;
  /** Whether the request carries a valid management token: such callers are never limited. */
  isManagement(authorization: string | undefined): Promise<boolean>;
  now?: () => number;
}

/**
 * A 429 is answered about this late: a client that asks again as soon as it is refused (a flood in a
 * closed loop: 11,000 429s a second from 128 connections took most of both cores) then sends one
 * request a second per connection; one that honours Retry-After (1 s or more) loses nothing.
 */
const TARPIT_MS = 1000;
/** Late answers held at once, at most (each keeps its request, ~25 KiB); past it, 429s are answered at once. */
const MAX_TARPITTED = 1000;

/**
 * Limits what anyone may send to the public endpoints (intake, approval links, metrics, the
 * API document): 429 problem+json with Retry-After past a client's share, before any work.
 */
export const rateLimit = (opts: RateLimitOptions): MiddlewareHandler => {
  const proxies = proxyList(opts.trustedProxies);
  const byAddress = opts.perAddress && new TokenBuckets(opts.perAddress);
  const bySignalType = opts.perSignalType && new TokenBuckets(opts.perSignalType);
  const now = opts.now ?? Date.now;
  const refusalsByType = opts.perSignalTypeRefusals ? new TokenBuckets(opts.perSignalTypeRefusals) : null;
  let tarpitted = 0;
  const late = async () => {
    if (tarpitted >= MAX_TARPITTED) return;
    tarpitted++;
    try {
      // Spread over half to one and a half times it: refused together, a flood's connections
      // would otherwise come back together, a burst each second.
      await new Promise((resolve) => setTimeout(resolve, TARPIT_MS * (0.5 + Math.random())));
    } finally {
      tarpitted--;
    }
  };
  const tooMany = async (c: Context, waitS: number) => {
    await late();
    return problemResponse(
      c,
      { type: "https://signalbox.dev/problems/rate-limited", title: "Too Many Requests", status: 429, detail: `too many requests: try again in ${Math.ceil(waitS)} s` },
      { "retry-after": String(Math.ceil(waitS)) },
    );
  };
  return async function limitRate(c, next) {
    const signal = opts.classify(c.req.method, c.req.path);
    if (signal === null || (!byAddress && !bySignalType && !refusalsByType)) return next();
    const authorization = c.req.header("authorization");
    if (authorization && (await opts.isManagement(authorization))) return next();
    const at = now();
    const waitS = Math.max(byAddress?.take(addressKey(clientAddress(c, proxies)), at) ?? 0, signal && bySignalType ? bySignalType.take(signal, at) : 0);
    if (waitS > 0) return tooMany(c, waitS);
    // Acts after `next` (unlike the other checks chained with it, src/http/chain.ts), but only on
    // the public requests classified above, which are never held open: no long-poll keeps this frame.
    await next();
    const status = c.res.status;
    if (!signal || !refusalsByType || status < 400 || status >= 500 || status === 429) return;
    const refusedWaitS = refusalsByType.take(signal, now());
    if (refusedWaitS === 0) return;
    if (status === 401 || status === 404) {
      c.res = undefined; // the refusal's headers are not the 429's
      c.res = await tooMany(c, refusedWaitS);
    } else {
      await late(); // recorded (a 409 or 422 has its signal id): answered as it is, but late
    }
  };
};
