export { AUTH_SCHEMES, verifySignature } from "./verify-signature.ts";
export type { AuthScheme, SignatureAuth, SignatureHeaders, VerifyResult } from "./verify-signature.ts";
export { standardWebhooksKey } from "./standard-webhooks.ts";
