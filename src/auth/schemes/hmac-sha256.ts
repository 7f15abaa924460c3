// Generic: hex (lower or upper case) HMAC-SHA256 of the raw body in the configured header,
// optionally prefixed "sha256="; secret as UTF-8.
import type { SignatureAuth, SignatureHeaders, VerifyResult } from "./signature-auth.ts";
import { anyMatch, decodeHexStrict, fail, MAC_BYTES, singleHeader, utf8Keys } from "./hmac.ts";

const PREFIX = "sha256=";
const HEADER_NAME_RE = /^[!#$%&'*+\-.^_`|~0-9a-z]{1,128}$/;

export function verifyHmacSha256(auth: SignatureAuth, headers: SignatureHeaders, body: Uint8Array): VerifyResult {
  if (typeof auth.header !== "string") return fail("no header configured");
  const name = auth.header.toLowerCase();
  if (!HEADER_NAME_RE.test(name)) return fail("invalid header name configured");
  const h = singleHeader(headers, name);
  if (!h.ok) return fail(h.reason);
  const hex = h.value.startsWith(PREFIX) ? h.value.slice(PREFIX.length) : h.value;
  const mac = decodeHexStrict(hex, MAC_BYTES, true);
  if (mac === null) return fail("malformed signature");
  const keys = utf8Keys(auth.secrets);
  if (keys.length === 0) return fail("no usable secret");
  return anyMatch(keys, "", body, [mac]) ? { ok: true } : fail("signature mismatch");
}
