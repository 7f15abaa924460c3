// Slack: X-Slack-Signature: v0=<hex HMAC-SHA256 of `v0:${ts}:` + raw body>, X-Slack-Request-Timestamp.
import type { SignatureAuth, SignatureHeaders, VerifyResult } from "./signature-auth.ts";
import { anyMatch, checkTimestamp, decodeHexStrict, fail, MAC_BYTES, parseTimestamp, singleHeader, utf8Keys } from "./hmac.ts";

const PREFIX = "v0=";

export function verifySlack(auth: SignatureAuth, headers: SignatureHeaders, body: Uint8Array, now: number): VerifyResult {
  const tsH = singleHeader(headers, "x-slack-request-timestamp");
  if (!tsH.ok) return fail(tsH.reason);
  const sigH = singleHeader(headers, "x-slack-signature");
  if (!sigH.ok) return fail(sigH.reason);
  const ts = parseTimestamp(tsH.value);
  if (ts === null) return fail("malformed timestamp");
  const tsProblem = checkTimestamp(ts, now, auth.tolerance_s);
  if (tsProblem !== null) return fail(tsProblem);
  if (!sigH.value.startsWith(PREFIX)) return fail("missing v0= prefix");
  const mac = decodeHexStrict(sigH.value.slice(PREFIX.length), MAC_BYTES);
  if (mac === null) return fail("malformed signature");
  const keys = utf8Keys(auth.secrets);
  if (keys.length === 0) return fail("no usable secret");
  return anyMatch(keys, `v0:${tsH.value}:`, body, [mac]) ? { ok: true } : fail("signature mismatch");
}
