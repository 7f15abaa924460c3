// Stripe: Stripe-Signature: t=<ts>,v1=<hex>[,v1=<hex>...][,v0=<hex>]; HMAC-SHA256 (lower-case hex)
// of `${t}.` + raw body, keyed with the whole `whsec_...` secret as UTF-8 bytes (not base64-decoded).
import type { SignatureAuth, SignatureHeaders, VerifyResult } from "./signature-auth.ts";
import { anyMatch, checkTimestamp, decodeHexStrict, fail, MAC_BYTES, parseTimestamp, singleHeader, utf8Keys } from "./hmac.ts";

/** At most this many comma-separated items (bounds parsing and HMAC work). */
const MAX_ITEMS = 16;
const ITEM_RE = /^([a-z0-9]{1,16})=([^=,\s]*)$/;

export function verifyStripe(auth: SignatureAuth, headers: SignatureHeaders, body: Uint8Array, now: number): VerifyResult {
  const h = singleHeader(headers, "stripe-signature");
  if (!h.ok) return fail(h.reason);
  const items = h.value.split(",");
  if (items.length > MAX_ITEMS) return fail("too many signature items");
  let t: string | null = null;
  const candidates: Buffer[] = [];
  for (const item of items) {
    const m = ITEM_RE.exec(item);
    if (m === null) return fail("malformed stripe-signature");
    const key = m[1];
    const value = m[2] ?? "";
    if (key === "t") {
      if (t !== null) return fail("repeated t");
      t = value;
    } else if (key === "v1") {
      const mac = decodeHexStrict(value, MAC_BYTES);
      if (mac === null) return fail("malformed v1 signature");
      candidates.push(mac);
    } // v0 and any other scheme are ignored
  }
  if (t === null) return fail("missing t");
  const ts = parseTimestamp(t);
  if (ts === null) return fail("malformed t");
  const tsProblem = checkTimestamp(ts, now, auth.tolerance_s);
  if (tsProblem !== null) return fail(tsProblem);
  if (candidates.length === 0) return fail("no v1 signature");
  const keys = utf8Keys(auth.secrets);
  if (keys.length === 0) return fail("no usable secret");
  return anyMatch(keys, `${t}.`, body, candidates) ? { ok: true } : fail("signature mismatch");
}
