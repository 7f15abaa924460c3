import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * Console sessions: a signed cookie, no server-side state. The cookie holds who signed in, how,
 * until when, and a random session id that CSRF tokens are bound to. It never holds the key or
 * JWT itself: a static key is named by a keyed fingerprint (so removing the key from
 * SIGNALBOX_API_KEYS ends its sessions), a JWT by its expiry (the session ends with it).
 */
export interface Session {
  /** Who acts: recorded as `by` on run control and as `responder` on approvals. */
  who: string;
  via: "key" | "jwt";
  /** Keyed fingerprint of the static key used (via "key" only). */
  keyPrint?: string;
  /** Unix seconds. */
  exp: number;
  /** Random per sign-in: CSRF tokens are bound to it. */
  sid: string;
}

export const SESSION_COOKIE = "signalbox_console";

export class SessionKeys {
  readonly #signing: Buffer;

  /**
   * `secret`: SIGNALBOX_CONSOLE_KEY when set, else the approval-link signing key. Either way the
   * key is derived (HKDF) for this one purpose, so a session MAC is never a link's signature.
   */
  constructor(secret: Uint8Array) {
    this.#signing = Buffer.from(hkdfSync("sha256", secret, "signalbox-console", "session-cookie v1", 32));
  }

  #mac(label: string, text: string): Buffer {
    return createHmac("sha256", this.#signing).update(`${label}\n${text}`).digest();
  }

  /** A static key's name in the cookie: the key cannot be recovered from it. */
  keyPrint(apiKey: string): string {
    return this.#mac("key", apiKey).subarray(0, 16).toString("base64url");
  }

  newSessionId(): string {
    return randomBytes(16).toString("base64url");
  }

  seal(session: Session): string {
    const body = Buffer.from(JSON.stringify(session)).toString("base64url");
    return `${body}.${this.#mac("session", body).toString("base64url")}`;
  }

  /** The session in a cookie value, if its signature holds and it has not expired. */
  open(cookie: string | undefined, nowS: number): Session | undefined {
    if (!cookie || cookie.length > 4096) return undefined;
    const [body, mac, extra] = cookie.split(".");
    if (!body || !mac || extra !== undefined) return undefined;
    if (!equalMacs(Buffer.from(mac, "base64url"), this.#mac("session", body))) return undefined;
    let session: Session;
    try {
      session = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as Session;
    } catch {
      return undefined;
    }
    if (typeof session.exp !== "number" || session.exp <= nowS || typeof session.who !== "string" || typeof session.sid !== "string") return undefined;
    return session;
  }

  /** The CSRF token every state-changing form of this session carries. */
  csrfToken(session: Session): string {
    return this.#mac("csrf", session.sid).toString("base64url");
  }

  checkCsrf(session: Session, presented: unknown): boolean {
    return typeof presented === "string" && presented.length < 100 && equalMacs(Buffer.from(presented, "base64url"), this.#mac("csrf", session.sid));
  }
}

function equalMacs(presented: Buffer, expected: Buffer): boolean {
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}
