import type { signalTypes } from "../db/schema.ts";

import type { AuthScheme } from "../auth/schemes/signature-auth.ts";

export const AUTH_SCHEMES = ["standard-webhooks", "github", "stripe", "shopify", "slack", "hmac-sha256", "none"] as const satisfies readonly AuthScheme[];
export type { AuthScheme };

/**
 * Schemes whose signature covers the body alone (no timestamp, no URL): a captured delivery
 * verifies forever and for any run. A type with one of them names the payload field that holds
 * the run (`run_pointer`), or says it accepts that (`replay_across_runs`).
 */
export const BODY_ONLY_SCHEMES: readonly AuthScheme[] = ["github", "shopify", "hmac-sha256"];

export interface SignalAuth {
  scheme: AuthScheme;
  secrets: string[];
  tolerance_s: number;
  header?: string;
  run_pointer?: string;
  replay_across_runs?: true;
  /** Never shown: see SignatureAuth.replay_floor_s. */
  replay_floor_s?: number;
}

export interface SignalTypeInput {
  description?: string | null;
  schema?: unknown;
  auth: { scheme: AuthScheme; secrets?: string[]; tolerance_s?: number; header?: string; run_pointer?: string; replay_across_runs?: boolean };
  buffer_ttl_s?: number;
  responses?: string[] | null;
  notify_url?: string | null;
  reminders_s?: number[];
  start?: { url: string } | null;
}

export type SignalTypeRow = typeof signalTypes.$inferSelect;

/** The public shape: secrets are write-only, so only their count is shown. */
export function toSignalTypeResource(row: SignalTypeRow) {
  const auth = row.auth as SignalAuth;
  return {
    name: row.name,
    description: row.description,
    schema: row.schema ?? null,
    auth: {
      scheme: auth.scheme,
      secret_count: auth.secrets.length,
      tolerance_s: auth.tolerance_s,
      ...(auth.header !== undefined ? { header: auth.header } : {}),
      ...(auth.run_pointer !== undefined ? { run_pointer: auth.run_pointer } : {}),
      ...(auth.replay_across_runs ? { replay_across_runs: true as const } : {}),
    },
    buffer_ttl_s: row.bufferTtlS,
    responses: row.responses ?? null,
    notify_url: row.notifyUrl,
    reminders_s: row.remindersS,
    start: row.startUrl === null ? null : { url: row.startUrl },
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}
export type SignalTypeResource = ReturnType<typeof toSignalTypeResource>;
