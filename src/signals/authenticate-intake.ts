import type { SignatureHeaders } from "../auth/schemes/signature-auth.ts";
import { verifySignature } from "../auth/schemes/verify-signature.ts";
import type { SignalAuth } from "../signal-types/signal-type.ts";

export interface IntakeCredentials {
  /** True when the request carried a valid management token: accepted for any signal type. */
  management: boolean;
  headers: SignatureHeaders;
  nowSeconds: number;
}

export type IntakeAuthResult = { ok: true; webhookId?: string } | { ok: false; reason: string };

/** Authenticates one intake request by its signal type's `auth`, or by a management token. */
export function authenticateIntake(auth: SignalAuth, input: { body: Uint8Array; credentials: IntakeCredentials }): IntakeAuthResult {
  if (input.credentials.management) return { ok: true };
  return verifySignature(auth, input.credentials.headers, input.body, input.credentials.nowSeconds);
}
