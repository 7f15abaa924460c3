// Standard Webhooks v1 verification of what signalbox POSTs to an engine (resume callbacks,
// notifications and run.start events): HMAC-SHA256 over `${webhook-id}.${webhook-timestamp}.${raw body}`, keyed with
// the base64 after `whsec_` of SIGNALBOX_CALLBACK_SECRET, sent as `v1,<base64>` in
// webhook-signature. WebCrypto only, so it runs wherever fetch does (Node, Bun, Deno, workers).
import type { SignalboxEvent } from "./types.ts";

/** Header values as `Headers`, or as node:http and express give them. */
export type HeadersLike = Headers | Record<string, string | string[] | undefined>;
/** The body exactly as received: verify before any JSON parser touches it. */
export type RawBody = string | Uint8Array | ArrayBuffer;

export interface VerifyOptions {
  /** How far `webhook-timestamp` may be from now, either way, in seconds (default 300). */
  toleranceS?: number;
  /** The current time in milliseconds (tests); default `Date.now()`. */
  now?: () => number;
}

/** Why a request is not a genuine signalbox event; answer it 401 (or 400) and do nothing. */
export class CallbackVerificationError extends Error {
  override readonly name = "CallbackVerificationError";
}

const SECRET_PREFIX = "whsec_";
const EVENT_TYPES = new Set(["signal.received", "signal.timeout", "signal.cancelled", "signal.waiting", "signal.reminder", "run.start"]);
/** webhook-id: printable ASCII with no space, comma or dot (a merged duplicate header has a comma; the dot separates the signed parts). */
const ID_RE = /^[\x21-\x2b\x2d\x2f-\x7e]{1,256}$/;
/** Unix seconds, digits only: "1700000000abc" is not a timestamp. */
const TIMESTAMP_RE = /^\d{1,15}$/;
/** One `v1,<base64>` entry. */
const V1_ENTRY_RE = /^v1,([A-Za-z0-9+/]+={0,2})$/;
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Verifies a request from signalbox and returns its event. Throws `CallbackVerificationError`
 * when a header is missing, repeated or malformed, the timestamp is outside the tolerance (a
 * replay of an old delivery), or no `v1` signature matches any of the secrets. `secret` may be a
 * list while you rotate SIGNALBOX_CALLBACK_SECRET. Throws `TypeError` for a `toleranceS` that is
 * not a finite number 0 or more, and for a secret that is not `whsec_` and base64.
 *
 * The same event may arrive more than once (delivery is at least once): deduplicate on `event.id`,
 * which is also the `webhook-id` and the same on every retry.
 */
export async function verifyCallback(headers: HeadersLike, rawBody: RawBody, secret: string | readonly string[], opts: VerifyOptions = {}): Promise<SignalboxEvent> {
  const toleranceS = opts.toleranceS ?? 300;
  // Checked first, whatever the request: `skewS > NaN` is never true, so a NaN (say, Number() of
  // an unset variable) would accept a replay of any age.
  if (!(Number.isFinite(toleranceS) && toleranceS >= 0)) throw new TypeError(`toleranceS must be a finite number of seconds, 0 or more (got ${toleranceS})`);
  const id = single(headers, "webhook-id");
  const timestamp = single(headers, "webhook-timestamp");
  const signatures = single(headers, "webhook-signature");
  if (!ID_RE.test(id)) throw new CallbackVerificationError("malformed webhook-id");
  if (!TIMESTAMP_RE.test(timestamp)) throw new CallbackVerificationError("malformed webhook-timestamp");
  const skewS = Math.abs((opts.now ?? Date.now)() / 1000 - Number(timestamp));
  if (skewS > toleranceS) throw new CallbackVerificationError("webhook-timestamp outside the tolerance");

  // As the Standard Webhooks reference does: entries that are empty (a double space), of another
  // version (whose format may differ) or not parseable are skipped; the header fails only when
  // no v1 entry matches. An entry adds nothing an attacker could use: each must be a genuine MAC.
  const candidates: Uint8Array[] = [];
  for (const entry of signatures.split(" ")) {
    const b64 = V1_ENTRY_RE.exec(entry)?.[1];
    if (b64 !== undefined && BASE64_RE.test(b64)) candidates.push(fromBase64(b64));
  }
  if (candidates.length === 0) throw new CallbackVerificationError("no v1 signature");

  const body = toBytes(rawBody);
  const signed = concat(new TextEncoder().encode(`${id}.${timestamp}.`), body);
  let matched = false;
  for (const key of (typeof secret === "string" ? [secret] : secret).map(secretKey)) {
    const mac = new Uint8Array(await crypto.subtle.sign("HMAC", await hmacKey(key), signed));
    // Every candidate is compared, each in constant time: the time taken says nothing about which matched.
    for (const candidate of candidates) matched = equalInConstantTime(mac, candidate) || matched;
  }
  if (!matched) throw new CallbackVerificationError("signature mismatch");

  return parseEvent(body, id);
}

/**
 * Signs a body as signalbox does: the headers to send with it. For testing your callback
 * handler without a signalbox; signalbox itself signs what it sends.
 */
export async function signCallback(secret: string, id: string, body: string, timestampS = Math.floor(Date.now() / 1000)): Promise<Record<string, string>> {
  const mac = await crypto.subtle.sign("HMAC", await hmacKey(secretKey(secret)), new TextEncoder().encode(`${id}.${timestampS}.${body}`));
  return { "webhook-id": id, "webhook-timestamp": String(timestampS), "webhook-signature": `v1,${toBase64(new Uint8Array(mac))}` };
}

function single(headers: HeadersLike, name: string): string {
  // Any Headers-like object (undici's, node-fetch's, a framework's), not only this realm's Headers.
  const value = typeof (headers as Headers).get === "function" ? (headers as Headers).get(name) : lookup(headers as Record<string, string | string[] | undefined>, name);
  if (value === null || value === undefined || value === "") throw new CallbackVerificationError(`missing ${name}`);
  if (Array.isArray(value)) throw new CallbackVerificationError(`more than one ${name}`);
  return value as string;
}

function lookup(headers: Record<string, string | string[] | undefined>, name: string): string | string[] | undefined {
  if (name in headers) return headers[name];
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : headers[key];
}

/** The HMAC key of a Standard Webhooks secret: the base64 after `whsec_` (or the whole string if bare base64). */
function secretKey(secret: string): Uint8Array {
  const b64 = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (b64 === "" || !BASE64_RE.test(b64)) throw new TypeError("the callback secret must be whsec_ followed by base64 (SIGNALBOX_CALLBACK_SECRET)");
  return fromBase64(b64);
}

function hmacKey(key: Uint8Array): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", key as Uint8Array<ArrayBuffer>, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

function equalInConstantTime(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false; // lengths are public: an HMAC-SHA256 is 32 bytes
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

function parseEvent(body: Uint8Array, id: string): SignalboxEvent {
  let event: unknown;
  try {
    event = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    throw new CallbackVerificationError("the body is not UTF-8 JSON");
  }
  const e = event as Partial<{ id: unknown; type: unknown; wait: unknown; run_id: unknown; signal: unknown }> | null;
  if (e === null || typeof e !== "object" || typeof e.id !== "string" || !EVENT_TYPES.has(String(e.type)) || !carriesItsSubject(e)) {
    throw new CallbackVerificationError("the body is not a signalbox event");
  }
  // Signed together, so they agree; checked anyway so that deduplicating on either is the same.
  if (e.id !== id) throw new CallbackVerificationError("webhook-id does not match the event id");
  return event as SignalboxEvent;
}

/** A run.start names its run and signal; every other event carries its wait. */
function carriesItsSubject(e: { type?: unknown; wait?: unknown; run_id?: unknown; signal?: unknown }): boolean {
  if (e.type === "run.start") return typeof e.run_id === "string" && typeof e.signal === "object" && e.signal !== null;
  return typeof e.wait === "object" && e.wait !== null;
}

function toBytes(body: RawBody): Uint8Array {
  if (typeof body === "string") return new TextEncoder().encode(body);
  return body instanceof Uint8Array ? body : new Uint8Array(body);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

function fromBase64(b64: string): Uint8Array {
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

function toBase64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}
