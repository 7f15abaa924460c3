import fs from "node:fs/promises";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { CALLBACK_SECRET_FORM, CALLBACK_SECRET_RULE, type Config } from "../config.ts";
import type { Log } from "../core/logger.ts";

/** An approval-link signing key: the first of the ring signs, all verify (by `kid`). */
export interface LinkKey {
  kid: string;
  secret: Uint8Array;
}

/**
 * The management keys, the callback signing key and the approval-link key ring. When not
 * configured, they are generated once and kept in the data dir (mode 0600), so a bare `npm start` is usable and stays stable
 * across restarts. Their values are never logged: only where to find them.
 */
export async function bootstrapSecrets(config: Config, log: Log): Promise<{ apiKeys: string[]; callbackSecret: Uint8Array; linkKeys: LinkKey[] }> {
  let apiKeys = config.SIGNALBOX_API_KEYS;
  if (apiKeys.length === 0 && !config.SIGNALBOX_JWT_SECRET && !config.SIGNALBOX_JWKS_URL) {
    const file = path.resolve(config.SIGNALBOX_DATA_DIR, "api-key");
    apiKeys = [await readOrCreate(file, () => `sbk_${randomBytes(24).toString("base64url")}`)];
    log.warn({ file }, "SIGNALBOX_API_KEYS is not set: using the generated management key stored in this file");
  }
  let secret = config.SIGNALBOX_CALLBACK_SECRET;
  if (!secret) {
    const file = path.resolve(config.SIGNALBOX_DATA_DIR, "callback-secret");
    secret = await readOrCreate(file, () => `whsec_${randomBytes(32).toString("base64")}`);
    if (!CALLBACK_SECRET_FORM.test(secret)) throw new Error(`${file} ${CALLBACK_SECRET_RULE}`);
    log.warn({ file }, "SIGNALBOX_CALLBACK_SECRET is not set: callbacks are signed with the generated secret stored in this file");
  }
  let linkKeys = config.SIGNALBOX_LINK_KEYS;
  if (linkKeys.length === 0) {
    const file = path.resolve(config.SIGNALBOX_DATA_DIR, "link-key");
    // A random kid: a key configured later never shares an id with this one.
    const line = await readOrCreate(file, () => `gen-${randomBytes(4).toString("hex")}:${randomBytes(32).toString("base64url")}`);
    const [, kid, key] = /^([A-Za-z0-9._-]{1,64}):(.{32,})$/.exec(line) ?? [];
    if (!kid || !key) throw new Error(`${file} must hold one line kid:secret (a secret of at least 32 bytes)`);
    linkKeys = [{ kid, secret: key }];
    log.warn({ file }, "SIGNALBOX_LINK_KEYS is not set: approval links are signed with the generated key stored in this file");
  }
  return { apiKeys, callbackSecret: callbackKey(secret), linkKeys: linkKeys.map((k) => ({ kid: k.kid, secret: Buffer.from(k.secret, "utf8") })) };
}

async function readOrCreate(file: string, make: () => string): Promise<string> {
  const existing = await fs.readFile(file, "utf8").catch(() => null);
  if (existing?.trim()) return existing.trim();
  await fs.mkdir(path.dirname(file), { recursive: true });
  const value = make();
  await fs.writeFile(file, value + "\n", { mode: 0o600 });
  return value;
}

/** A `whsec_<base64>` secret (config.ts checks its form) is its decoded bytes. */
export function callbackKey(secret: string): Uint8Array {
  return Buffer.from(secret.slice("whsec_".length), "base64");
}
