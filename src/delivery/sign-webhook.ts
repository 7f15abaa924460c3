import { createHmac } from "node:crypto";

/**
 * Standard Webhooks signing (the format engines verify with the `standardwebhooks` library):
 * v1 = base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")).
 */
export function signWebhook(key: Uint8Array, id: string, timestampS: number, body: string): Record<string, string> {
  const signature = createHmac("sha256", key).update(`${id}.${timestampS}.${body}`).digest("base64");
  return { "webhook-id": id, "webhook-timestamp": String(timestampS), "webhook-signature": `v1,${signature}` };
}
