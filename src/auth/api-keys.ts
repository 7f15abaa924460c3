import { hash, timingSafeEqual } from "node:crypto";
import { keptFor } from "../core/kept-for.ts";

/**
 * Constant-time check of a bearer token against the static keys: both sides are hashed to
 * equal-length digests first, and every key is compared, so timing says nothing about which
 * key or how many characters matched.
 */
export function matchesApiKey(token: string, keys: readonly string[]): boolean {
  const presented = sha256(token);
  let ok = false;
  for (const expected of digestsOf(keys)) ok = timingSafeEqual(presented, expected) || ok;
  return ok;
}

/** One-shot (crypto.hash): a Hash object per request cost more than the digest. */
const sha256 = (text: string) => hash("sha256", text, "buffer");

/** The configured keys' digests, made once per list (the configuration's): not on every request. */
const keyDigests = new WeakMap<readonly string[], Buffer[]>();
const digestsOf = (keys: readonly string[]): Buffer[] => keptFor(keyDigests, keys, (k) => k.map(sha256));

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = header ? /^Bearer[ ]+([^\s]+)\s*$/i.exec(header) : null;
  return m?.[1];
}
