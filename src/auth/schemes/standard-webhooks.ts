// Standard Webhooks v1 (HMAC-SHA256): webhook-id / webhook-timestamp / webhook-signature.
// Signed content: `${id}.${timestamp}.` followed by the raw body bytes.
import type { SignatureAuth, SignatureHeaders, VerifyResult } from "./signature-auth.ts";
import { anyMatch, checkTimestamp, decodeBase64Mac, decodeBase64Strict, fail, parseTimestamp, singleHeader } from "./hmac.ts";

const SECRET_PREFIX = "whsec_";
/** At most this many space-separated entries in webhook-signature (bounds HMAC work). */
const MAX_SIGNATURE_ENTRIES = 16;
/** webhook-id: 1–256 printable ASCII characters, no "." (the signed-content separator). */
const ID_RE = /^[\x21-\x2d\x2f-\x7e]{1,256}$/;
/** One `<version>,<base64>` entry. Anything else (e.g. a trailing comma left by header merging) fails the whole header. */
const ENTRY_RE = /^([A-Za-z0-9]{1,16}),([A-Za-z0-9+/]+={0,2})$/;

/** The HMAC key for a Standard Webhooks secret (`whsec_` + base64, or bare base64); null if not strict base64. */
export function standardWebhooksKey(secret: string): Buffer | null {
  if (typeof secret !== "string") return null;
  const b64 = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  return decodeBase64Strict(b64);
}

export function verifyStandardWebhooks(auth: SignatureAuth, headers: SignatureHeaders, body: Uint8Array, now: number): VerifyResult {
  const idH = singleHeader(headers, "webhook-id");
  if (!idH.ok) return fail(idH.reason);
  const tsH = singleHeader(headers, "webhook-timestamp");
  if (!tsH.ok) return fail(tsH.reason);
  const sigH = singleHeader(headers, "webhook-signature");
  if (!sigH.ok) return fail(sigH.reason);

  const id = idH.value;
  if (!ID_RE.test(id)) return fail("malformed webhook-id");
  const ts = parseTimestamp(tsH.value);
  if (ts === null) return fail("malformed webhook-timestamp");
  const tsProblem = checkTimestamp(ts, now, auth.tolerance_s);
  if (tsProblem !== null) return fail(tsProblem);
  if (auth.replay_floor_s !== undefined && ts < auth.replay_floor_s) return fail("timestamp before the tolerance was raised");

  const entries = sigH.value.split(" ");
  if (entries.length > MAX_SIGNATURE_ENTRIES) return fail("too many signatures");
  const candidates: Buffer[] = [];
  for (const entry of entries) {
    const m = ENTRY_RE.exec(entry);
    if (m === null) return fail("malformed webhook-signature");
    if (m[1] !== "v1") continue; // other versions (v1a, v2, V1...) are skipped, never trusted
    const mac = decodeBase64Mac(m[2] ?? "");
    if (mac === null) return fail("malformed v1 signature");
    candidates.push(mac);
  }
  if (candidates.length === 0) return fail("no v1 signature");

  const keys: Buffer[] = [];
  for (const s of auth.secrets) {
    const key = standardWebhooksKey(s);
    if (key !== null && key.byteLength > 0) keys.push(key);
  }
  if (keys.length === 0) return fail("no usable secret");

  if (!anyMatch(keys, `${id}.${tsH.value}.`, body, candidates)) return fail("signature mismatch");
  return { ok: true, webhookId: id };
}
