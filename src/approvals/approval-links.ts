import { errors, jwtVerify, SignJWT, type JWTPayload } from "jose";
import type { LinkKey } from "../auth/bootstrap-secrets.ts";

/** What an approval link says: answer `response` to this wait (this version of it), as `responder`. */
export interface LinkClaims {
  waitId: string;
  /** The wait's created_at in ms: a link is bound to the wait as it was made, not just its id. */
  version: number;
  response: string;
  responder: string;
  /** One per set of links made together (one person's choice): the set works once. */
  linkId: string;
  expiresAt: Date;
}

export type VerifiedLink = { ok: true; claims: LinkClaims; kid: string } | { ok: false; reason: "expired" | "invalid" };

/** The JOSE `typ` of a link: a management JWT signed with the same secret is not a link, nor the other way round. */
const LINK_TYP = "signalbox-approval+jwt";
const ALGORITHMS = ["HS256"];
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Signs a link with the ring's first key, naming it in `kid` so a rotated ring still verifies it. */
export async function signLink(ring: readonly LinkKey[], c: LinkClaims, now = new Date()): Promise<string> {
  const key = ring[0];
  if (!key) throw new Error("no approval-link signing key");
  return new SignJWT({ wid: c.waitId, ver: c.version, rsp: c.response, who: c.responder })
    .setProtectedHeader({ alg: "HS256", kid: key.kid, typ: LINK_TYP })
    .setJti(c.linkId)
    .setIssuedAt(Math.floor(now.getTime() / 1000))
    .setExpirationTime(Math.floor(c.expiresAt.getTime() / 1000))
    .sign(key.secret);
}

/**
 * Verifies a link against every key of the ring, chosen by `kid` (a token without one, or with
 * an unknown one, is invalid). HS256 only: `alg: none` and any other algorithm are refused.
 * `exp` is required and no clock tolerance is given: a link is dead at its expiry.
 */
export async function verifyLink(ring: readonly LinkKey[], token: string, now = new Date()): Promise<VerifiedLink> {
  if (token.length > 4096 || !COMPACT_JWS.test(token)) return { ok: false, reason: "invalid" };
  let kid = "";
  try {
    const { payload, protectedHeader } = await jwtVerify(
      token,
      (header) => {
        const key = ring.find((k) => k.kid === header.kid);
        if (!key) throw new errors.JWKSNoMatchingKey();
        kid = key.kid;
        return key.secret;
      },
      { algorithms: ALGORITHMS, typ: LINK_TYP, requiredClaims: ["exp", "jti"], currentDate: now },
    );
    const claims = readClaims(payload);
    if (!claims || protectedHeader.kid !== kid) return { ok: false, reason: "invalid" };
    return { ok: true, claims, kid };
  } catch (err) {
    // Only a correctly signed token can be "expired": jose checks the signature before the claims.
    return { ok: false, reason: err instanceof errors.JWTExpired ? "expired" : "invalid" };
  }
}

function readClaims(p: JWTPayload): LinkClaims | null {
  const { wid, ver, rsp, who, jti, exp } = p as Record<string, unknown>;
  if (typeof wid !== "string" || typeof rsp !== "string" || typeof who !== "string" || typeof jti !== "string") return null;
  if (typeof ver !== "number" || !Number.isSafeInteger(ver) || typeof exp !== "number") return null;
  return { waitId: wid, version: ver, response: rsp, responder: who, linkId: jti, expiresAt: new Date(exp * 1000) };
}
