// Shopify: X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256 of the raw body>, secret as UTF-8.
import type { SignatureAuth, SignatureHeaders, VerifyResult } from "./signature-auth.ts";
import { anyMatch, decodeBase64Mac, fail, singleHeader, utf8Keys } from "./hmac.ts";

export function verifyShopify(auth: SignatureAuth, headers: SignatureHeaders, body: Uint8Array): VerifyResult {
  const h = singleHeader(headers, "x-shopify-hmac-sha256");
  if (!h.ok) return fail(h.reason);
  const mac = decodeBase64Mac(h.value);
  if (mac === null) return fail("malformed signature");
  const keys = utf8Keys(auth.secrets);
  if (keys.length === 0) return fail("no usable secret");
  return anyMatch(keys, "", body, [mac]) ? { ok: true } : fail("signature mismatch");
}
