import { isIP } from "node:net";
import { z } from "zod";
import { refusedParams, withLibpqEnvironment } from "./config-database-url.ts";

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

/**
 * A callback secret as Standard Webhooks libraries (and the engine SDK) read it: `whsec_` and
 * padded base64, the key its decoded bytes. Anything else was once signed with its UTF-8 bytes,
 * which no engine verified.
 */
export const CALLBACK_SECRET_FORM = /^whsec_(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$/;
export const CALLBACK_SECRET_RULE = "must be whsec_ followed by padded base64 (as Standard Webhooks libraries read it)";

/** The bytes of SIGNALBOX_SECRET_KEY: 64 hex characters, else base64. Valid when 32 bytes long. */
export function secretKeyBytes(text: string): Uint8Array {
  return /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, "hex") : Buffer.from(text, "base64");
}

/** Static management keys: a key with a space or a control character could never be presented. */
const apiKeys = csv.superRefine((keys, ctx) => {
  if (keys.some((k) => /[\s\x00-\x1f\x7f]/.test(k))) ctx.addIssue({ code: "custom", message: "a key contains a space or a control character (keys are comma-separated)" });
});

const ConfigSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  DATABASE_URL: z
    .string()
    .url("not a URL: postgres://user:password@host:5432/database expected")
    .refine((v) => !URL.canParse(v) || /^postgres(ql)?:$/.test(new URL(v).protocol), "postgres://user:password@host:5432/database expected")
    // A libpq parameter neither driver can honour (src/config-database-url.ts) stops the start here.
    .superRefine((v, ctx) => {
      for (const message of refusedParams(v)) ctx.addIssue({ code: "custom", message });
    })
    .optional(),
  SIGNALBOX_DATA_DIR: z.string().min(1).default("./.signalbox"),
  SIGNALBOX_API_KEYS: apiKeys,
  SIGNALBOX_JWT_SECRET: z.string().min(32, "SIGNALBOX_JWT_SECRET must be at least 32 bytes").optional(),
  SIGNALBOX_JWKS_URL: z.string().url().optional(),
  SIGNALBOX_JWT_ISSUER: z.string().min(1).optional(),
  SIGNALBOX_JWT_AUDIENCE: z.string().min(1).optional(),
  /** 32 bytes (base64 or hex) that encrypt signing secrets at rest. */
  SIGNALBOX_SECRET_KEY: z
    .string()
    .min(1)
    .refine((v) => secretKeyBytes(v).byteLength === 32, "must be 32 bytes, as base64 (44 characters) or 64 hex characters")
    .optional(),
  SIGNALBOX_CALLBACK_SECRET: z.string().regex(CALLBACK_SECRET_FORM, CALLBACK_SECRET_RULE).optional(),
  SIGNALBOX_MAX_BODY_BYTES: z.coerce.number().int().positive().default(1024 * 1024),
  SIGNALBOX_DELIVERY_BACKOFF_S: z.coerce.number().positive().default(1),
  SIGNALBOX_DELIVERY_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(10),
  SIGNALBOX_SIGNAL_TYPES_FILE: z.string().min(1).optional(),
  SIGNALBOX_PUBLIC_URL: z.string().url().optional(),
  /** Hosts (name or name:port) approval links may take from a request when SIGNALBOX_PUBLIC_URL is unset; empty: loopback only. */
  SIGNALBOX_LINK_HOSTS: csv,
  /** Approval-link signing keys (`kid:secret,...`); unset, one is generated into the data dir. */
  SIGNALBOX_LINK_KEYS: linkKeys,
  /** Sensor targets allowed despite the link-local guard (CIDRs or addresses). */
  SIGNALBOX_SENSOR_ALLOW: csv,
  /** How long one sensor request may take. */
  SIGNALBOX_SENSOR_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(10_000),
  SIGNALBOX_DB_POOL_SIZE: z.coerce.number().int().min(1).max(100).default(8),
  SIGNALBOX_WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(8),
  /** Callback, notification and sensor jobs run at once (a runner of their own, apart from timeouts). */
  SIGNALBOX_DELIVERY_CONCURRENCY: z.coerce.number().int().min(1).max(200).default(32),
  /** Callback requests in flight to one endpoint (host[:port]) at most. */
  SIGNALBOX_DELIVERY_ENDPOINT_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(16),
  /** Failed callback attempts in a row after which an endpoint is backed off as a whole. */
  SIGNALBOX_DELIVERY_ENDPOINT_FAILURES: z.coerce.number().int().min(1).max(1000).default(5),
  SIGNALBOX_POLL_INTERVAL_MS: z.coerce.number().int().min(50).default(100),
  SIGNALBOX_SSE_HEARTBEAT_S: z.coerce.number().positive().default(15),
  /** Long-polls, checkpoints and event streams held open at once per process; past it 503 with Retry-After. */
  SIGNALBOX_MAX_HELD_REQUESTS: z.coerce.number().int().positive().default(5_000),
  /** A worker pool unseen this long is dead (heartbeats every third of it): its jobs are released. */
  SIGNALBOX_WORKER_STALE_S: z.coerce.number().positive().default(12),
  SIGNALBOX_HEADERS_TIMEOUT_S: z.coerce.number().positive().default(10),
  SIGNALBOX_REQUEST_TIMEOUT_S: z.coerce.number().positive().default(30),
  SIGNALBOX_KEEP_ALIVE_TIMEOUT_S: z.coerce.number().positive().default(5),
  SIGNALBOX_MAX_CONNECTIONS: z.coerce.number().int().positive().default(10_000),
  SIGNALBOX_MAX_CONNECTIONS_PER_ADDRESS: z.coerce.number().int().positive().default(1_000),
  /** Public requests (intake, approval links, metrics, docs) one client address may send a second, sustained; 0: no limit. */
  SIGNALBOX_RATE_LIMIT_PER_ADDRESS: z.coerce.number().min(0).default(100),
  /** Anonymous intake requests one signal type takes a second from all addresses together; 0: no limit. */
  SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: z.coerce.number().min(0).default(1000),
  /** Of those, refusals (4xx) a second before the rest are answered late; unset, a tenth of the type's rate; 0: no limit. */
  SIGNALBOX_RATE_LIMIT_REFUSALS_PER_SIGNAL_TYPE: z.coerce.number().min(0).optional(),
  /** Proxies (addresses or CIDRs) whose X-Forwarded-For names the client; unset, the header is ignored. */
  SIGNALBOX_TRUSTED_PROXIES: csv.superRefine((entries, ctx) => {
    for (const entry of entries) {
      const [address = "", bits] = entry.split("/");
      const version = isIP(address);
      if (version === 0 || (bits !== undefined && !(/^\d+$/.test(bits) && Number(bits) <= (version === 4 ? 32 : 128)))) {
        ctx.addIssue({ code: "custom", message: `'${entry}' is not an address or CIDR` });
      }
    }
  }),
  /** Request lines (and, apart, unhandled-error lines) logged a second at most; the rest are counted in one line. */
  SIGNALBOX_LOG_REQUESTS_PER_S: z.coerce.number().int().min(1).default(200),
  /**
   * Resolved waits, their history and deliveries, signals and notifications older than this are
   * purged; 0 keeps everything. At most 100 years: the purge's cutoff must stay a timestamp
   * Postgres can hold (millions of days made every purge fail).
   */
  SIGNALBOX_RETENTION_DAYS: z.coerce.number().int().min(0).max(36_500).default(30),
  /** Rejected signals kept per signal type (anyone may cause them), the oldest purged first by the retention job; 0: no cap. */
  SIGNALBOX_REJECTED_PER_SIGNAL_TYPE: z.coerce.number().int().min(0).default(10_000),
  /** Signs operator-console sessions (raw UTF-8, at least 32 bytes); unset, a key is derived from the callback secret. */
  SIGNALBOX_CONSOLE_KEY: z.string().min(32, "SIGNALBOX_CONSOLE_KEY must be at least 32 bytes").optional(),
  /** How long a console sign-in lasts (a JWT's own `exp` ends it sooner). */
  SIGNALBOX_CONSOLE_SESSION_S: z.coerce.number().int().min(60).max(7 * 86400).default(8 * 3600),
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});

export type Config = z.infer<typeof ConfigSchema>;

export function loadConfig(env: Record<string, string | undefined>): Config {
  // libpq's PGSSLMODE and the like, where the URL does not say (src/config-database-url.ts).
  const libpq = env.DATABASE_URL ? withLibpqEnvironment(env.DATABASE_URL, env) : undefined;
  const parsed = ConfigSchema.safeParse(libpq ? { ...env, DATABASE_URL: libpq.url } : env);
  // One line, naming each setting to fix (never its value: it may be a secret).
  const problems = [...(parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`)), ...(libpq?.refused ?? [])];
  if (problems.length > 0) throw new Error(`invalid configuration: ${problems.join("; ")}`);
  return parsed.data!;
}
