// Pure webhook-signature verification: no I/O, no clock (the caller passes `nowSeconds`),
// never throws. The caller must pass the raw request bytes, read once, before any decoding.
import { verifyGithub } from "./github.ts";
import { fail } from "./hmac.ts";
import { verifyHmacSha256 } from "./hmac-sha256.ts";
import { verifyShopify } from "./shopify.ts";
import { verifySlack } from "./slack.ts";
import { verifyStandardWebhooks } from "./standard-webhooks.ts";
import { verifyStripe } from "./stripe.ts";
import type { SignatureAuth, SignatureHeaders, VerifyResult } from "./signature-auth.ts";

export function verifySignature(auth: SignatureAuth, headers: SignatureHeaders, rawBody: Uint8Array, nowSeconds: number): VerifyResult {
  try {
    if (auth === null || typeof auth !== "object") return fail("invalid auth config");
    if (auth.scheme === "none") return { ok: true };
    if (!Array.isArray(auth.secrets)) return fail("invalid auth config");
    if (typeof headers !== "function") return fail("invalid headers");
    if (!(rawBody instanceof Uint8Array)) return fail("invalid body");
    switch (auth.scheme) {
      case "standard-webhooks":
        return verifyStandardWebhooks(auth, headers, rawBody, nowSeconds);
      case "github":
        return verifyGithub(auth, headers, rawBody);
      case "stripe":
        return verifyStripe(auth, headers, rawBody, nowSeconds);
      case "shopify":
        return verifyShopify(auth, headers, rawBody);
      case "slack":
        return verifySlack(auth, headers, rawBody, nowSeconds);
      case "hmac-sha256":
        return verifyHmacSha256(auth, headers, rawBody);
      default:
        return fail("unknown scheme");
    }
  } catch {
    return fail("verification error");
  }
}
