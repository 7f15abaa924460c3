import { createHash, timingSafeEqual } from "node:crypto";

/**
 * Constant-time check of a bearer token against the static keys: both sides are hashed to
 * equal-length digests first, and every key is compared, so timing says nothing about which
 * key or how many characters matched.
 */
export function matchesApiKey(token: string, keys: readonly string[]): boolean {
  const presented = createHash("sha256").update(token).digest();
  let ok = false;
  for (const key of keys) {
    const expected = createHash("sha256").update(key).digest();
    ok = timingSafeEqual(presented, expected) || ok;
  }
  return ok;
}

/** The token of an `Authorization: Bearer <token>` header, or undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  const m = header ? /^Bearer[ ]+([^\s]+)\s*$/i.exec(header) : null;
  return m?.[1];
}
