import { decodeJwt } from "jose";
import { matchesApiKey } from "../auth/api-keys.ts";
import { isStorable } from "../core/storable-text.ts";
import type { Session, SessionKeys } from "./session.ts";

export interface SignInInput {
  /** A static management key or a management JWT: checked exactly as the API checks a bearer token. */
  credential: string;
  /** The name a key holder gives (a key names nobody); ignored for a JWT, which names its subject. */
  name: string;
}

export type SignInResult = { ok: true; session: Session } | { ok: false; problem: string };

const NAME = /^[^\x00-\x1f\x7f]{1,200}$/;
/** The name is recorded (jsonb) on what the operator does: Postgres must be able to store it. */
const isName = (v: string) => NAME.test(v) && isStorable(v);

/**
 * Signs an operator in with the same verification as the API's bearer tokens (`verifyToken`).
 * The session lasts `sessionS`, and never beyond a JWT's own `exp`.
 */
export async function signIn(
  input: SignInInput,
  opts: { verifyToken(token: string | undefined): Promise<boolean>; apiKeys: readonly string[]; keys: SessionKeys; sessionS: number; nowS: number },
): Promise<SignInResult> {
  const credential = input.credential.trim();
  if (!(await opts.verifyToken(credential))) return { ok: false, problem: "That key or token is not valid." };
  const base = { sid: opts.keys.newSessionId(), exp: opts.nowS + opts.sessionS };
  if (opts.apiKeys.length > 0 && matchesApiKey(credential, opts.apiKeys)) {
    const name = input.name.trim();
    if (!isName(name)) return { ok: false, problem: "With a management key, give your name (1 to 200 characters): it is recorded on what you do." };
    return { ok: true, session: { ...base, who: name, via: "key", keyPrint: opts.keys.keyPrint(credential) } };
  }
  // Verified above, so its claims can be read as they are.
  const claims = decodeJwt(credential);
  const names = [claims["email"], claims.sub].filter((v): v is string => typeof v === "string" && NAME.test(v));
  const subject = names.find(isStorable);
  if (!subject) {
    return { ok: false, problem: names.length > 0 ? "The token's sub or email claim cannot be recorded: it holds a broken character (an unpaired UTF-16 surrogate)." : "The token names nobody (no sub or email claim)." };
  }
  return { ok: true, session: { ...base, who: subject, via: "jwt", exp: Math.min(base.exp, claims.exp ?? base.exp) } };
}
