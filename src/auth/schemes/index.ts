export { verifySignature } from "./verify-signature.ts";
export { AUTH_SCHEMES } from "./signature-auth.ts";
export type { AuthScheme, SignatureAuth, SignatureHeaders, VerifyResult } from "./signature-auth.ts";
export { standardWebhooksKey } from "./standard-webhooks.ts";
