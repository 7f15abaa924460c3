// GitHub: X-Hub-Signature-256: sha256=<lower-case hex HMAC-SHA256 of the raw body>, secret as UTF-8.
import type { SignatureAuth, SignatureHeaders, VerifyResult } from "./signature-auth.ts";
import { anyMatch, decodeHexStrict, fail, MAC_BYTES, singleHeader, utf8Keys } from "./hmac.ts";

const PREFIX = "sha256=";

export function verifyGithub(auth: SignatureAuth, headers: SignatureHeaders, body: Uint8Array): VerifyResult {
  const h = singleHeader(headers, "x-hub-signature-256");
  if (!h.ok) return fail(h.reason);
  if (!h.value.startsWith(PREFIX)) return fail("missing sha256= prefix");
  const mac = decodeHexStrict(h.value.slice(PREFIX.length), MAC_BYTES);
  if (mac === null) return fail("malformed signature");
  const keys = utf8Keys(auth.secrets);
  if (keys.length === 0) return fail("no usable secret");
  return anyMatch(keys, "", body, [mac]) ? { ok: true } : fail("signature mismatch");
}
