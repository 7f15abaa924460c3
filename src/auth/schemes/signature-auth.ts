// What every scheme's verifier takes and returns. Its own file, below verify-signature.ts and
// the schemes, so that the dispatcher and the schemes it dispatches to never import each other.

export type AuthScheme = "standard-webhooks" | "github" | "stripe" | "shopify" | "slack" | "hmac-sha256" | "none";
export interface SignatureAuth {
  scheme: AuthScheme;
  secrets: string[];
  tolerance_s?: number;
  header?: string;
  /**
   * Signed ids (standard-webhooks): no timestamp before this (unix seconds) verifies. Set when the
   * tolerance was raised (signal-types/replay-floor.ts): an id accepted under the old tolerance
   * was kept only twice that long, so a capture older than the old window could come back.
   */
  replay_floor_s?: number;
}
/** All values of a header (lower-case name); [] when absent. */
export type SignatureHeaders = (name: string) => string[];
/** `reason` is for logs/metrics only, never sent to the caller. */
export type VerifyResult = { ok: true; webhookId?: string } | { ok: false; reason: string };

export const AUTH_SCHEMES: readonly AuthScheme[] = ["standard-webhooks", "github", "stripe", "shopify", "slack", "hmac-sha256", "none"];
