import { createHmac, createSecretKey, type KeyObject } from "node:crypto";
import { keptFor } from "../core/kept-for.ts";

/** Each signing key as a KeyObject, made once: createHmac re-imports a raw key on every call (a tenth of a callback's CPU). */
const keyObjects = new WeakMap<Uint8Array, KeyObject>();

function keyObject(key: Uint8Array): KeyObject | Uint8Array {
  if (key.length === 0) return key; // createSecretKey refuses an empty key; HMAC takes it
  return keptFor(keyObjects, key, (k) => createSecretKey(k));
}

/**
 * Standard Webhooks signing (the format engines verify with the `standardwebhooks` library):
 * v1 = base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")).
 */
export function signWebhook(key: Uint8Array, id: string, timestampS: number, body: string): Record<string, string> {
  const signature = createHmac("sha256", keyObject(key)).update(`${id}.${timestampS}.${body}`).digest("base64");
  return { "webhook-id": id, "webhook-timestamp": String(timestampS), "webhook-signature": `v1,${signature}` };
}
