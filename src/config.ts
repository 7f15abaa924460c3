import { z } from "zod";

/** Every environment variable signalbox reads, parsed once. `main.ts` is the only caller with `process.env`. */
const csv = z
  .string()
  .optional()
  .transform((v) => (v ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0));

/**
 * `kid:secret,kid:secret`: the approval-link key ring. The first key signs new links; every key
 * verifies, so a rotated-out key keeps its unexpired links valid until it is removed.
 */
const linkKeys = z
  .string()
  .optional()
  .transform((v, ctx) => {
    const keys: Array<{ kid: string; secret: string }> = [];
    for (const item of (v ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0)) {
      const colon = item.indexOf(":");
      const kid = colon < 0 ? "" : item.slice(0, colon);
      const secret = colon < 0 ? "" : item.slice(colon + 1);
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(kid)) ctx.addIssue({ code: "custom", message: "each key must be kid:secret, kid from A-Z a-z 0-9 . _ - (at most 64)" });
      else if (Buffer.byteLength(secret, "utf8") < 32) ctx.addIssue({ code: "custom", message: `the secret of key '${kid}' must be at least 32 bytes` });
      else if (keys.some((k) => k.kid === kid)) ctx.addIssue({ code: "custom", message: `key id '${kid}' appears twice` });
      else keys.push({ kid, secret });
    }
    return keys;
  });

const ConfigSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  DATABASE_URL: z.string().url().optional(),
  SIGNALBOX_DATA_DIR: z.string().min(1).default("./.signalbox"),
  SIGNALBOX_API_KEYS: csv,
  SIGNALBOX_JWT_SECRET: z.string().min(32, "SIGNALBOX_JWT_SECRET must be at least 32 bytes").optional(),
  SIGNALBOX_JWKS_URL: z.string().url().optional(),
  SIGNALBOX_JWT_ISSUER: z.string().min(1).optional(),
  SIGNALBOX_JWT_AUDIENCE: z.string().min(1).optional(),
  /** 32 bytes (base64 or hex) that encrypt signing secrets at rest. */
  SIGNALBOX_SECRET_KEY: z.string().min(1).optional(),
  SIGNALBOX_CALLBACK_SECRET: z.string().min(1).optional(),
  SIGNALBOX_MAX_BODY_BYTES: z.coerce.number().int().positive().default(1024 * 1024),
  SIGNALBOX_DELIVERY_BACKOFF_S: z.coerce.number().positive().default(1),
  SIGNALBOX_DELIVERY_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(10),
  SIGNALBOX_SIGNAL_TYPES_FILE: z.string().min(1).optional(),
  SIGNALBOX_PUBLIC_URL: z.string().url().optional(),
  /** Approval-link signing keys (`kid:secret,...`); unset, one is generated into the data dir. */
  SIGNALBOX_LINK_KEYS: linkKeys,
  /** Sensor targets allowed despite the link-local guard (CIDRs or addresses). */
  SIGNALBOX_SENSOR_ALLOW: csv,
  /** How long one sensor request may take. */
  SIGNALBOX_SENSOR_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  SIGNALBOX_DB_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(8),
  SIGNALBOX_WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(8),
  SIGNALBOX_POLL_INTERVAL_MS: z.coerce.number().int().min(50).default(100),
  SIGNALBOX_SSE_HEARTBEAT_S: z.coerce.number().positive().default(15),
  SIGNALBOX_WORKER_STALE_S: z.coerce.number().positive().default(60),
  /** Resolved waits, their history and deliveries, signals and notifications older than this are purged; 0 keeps everything. */
  SIGNALBOX_RETENTION_DAYS: z.coerce.number().int().min(0).default(30),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});

export type Config = z.infer<typeof ConfigSchema>;

export function loadConfig(env: Record<string, string | undefined>): Config {
  const parsed = ConfigSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid configuration:\n  ${lines.join("\n  ")}`);
  }
  return parsed.data;
}
