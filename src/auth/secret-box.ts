import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { secretKeyBytes } from "../config.ts";

const PREFIX = "enc:v1:";

/**
 * Signing secrets must be usable (HMAC), so they cannot be hashed: they are encrypted at rest
 * with AES-256-GCM under SIGNALBOX_SECRET_KEY. The signal type's name is the associated data, so
 * a ciphertext copied onto another signal type does not decrypt.
 */
export class SecretBox {
  readonly #key: Uint8Array;
  constructor(key: Uint8Array) {
    if (key.byteLength !== 32) throw new Error("SIGNALBOX_SECRET_KEY must be 32 bytes (base64 or 64 hex characters)");
    this.#key = key;
  }

  seal(secret: string, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    cipher.setAAD(Buffer.from(context));
    const body = Buffer.concat([cipher.update(secret, "utf8"), cipher.final()]);
    return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64");
  }

  open(stored: string, context: string): string {
    if (!stored.startsWith(PREFIX)) return stored; // stored before a key was configured
    const raw = Buffer.from(stored.slice(PREFIX.length), "base64");
    const decipher = createDecipheriv("aes-256-gcm", this.#key, raw.subarray(0, 12));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(raw.subarray(12, 28));
    return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8");
  }
}

/** Without a key secrets are stored as given (the start-up log says so). */
export function sealSecrets(box: SecretBox | undefined, secrets: string[], context: string): string[] {
  return box ? secrets.map((s) => box.seal(s, context)) : secrets;
}

/**
 * The usable secrets. One that cannot be opened (no key configured, another key, or a ciphertext
 * copied from another signal type so the associated data differs) is left out: verification then
 * fails closed with a 401 instead of the request failing with a 500.
 */
export function openSecrets(box: SecretBox | undefined, stored: string[], context: string): string[] {
  const opened: string[] = [];
  for (const s of stored) {
    if (typeof s !== "string") continue;
    if (!s.startsWith(PREFIX)) {
      opened.push(s);
      continue;
    }
    if (!box) continue;
    try {
      opened.push(box.open(s, context));
    } catch {
      // tampered, truncated or sealed for another context: never usable
    }
  }
  return opened;
}

export function parseSecretKey(text: string): Uint8Array {
  const key = secretKeyBytes(text);
  if (key.byteLength !== 32) throw new Error("SIGNALBOX_SECRET_KEY must be 32 bytes (base64 or 64 hex characters)");
  return key;
}
