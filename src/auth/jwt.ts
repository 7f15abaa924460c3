import { createRemoteJWKSet, jwtVerify, type JWTVerifyOptions } from "jose";

export interface JwtOptions {
  /** HS256 shared secret, used as raw UTF-8 bytes (at least 32). */
  secret?: string;
  jwksUrl?: string;
  issuer?: string;
  audience?: string;
}

const ASYMMETRIC = ["RS256", "PS256", "ES256", "ES384", "EdDSA"];

/**
 * Verifies management JWTs with jose: algorithms pinned per key source (so `alg: none` and
 * HS/RS confusion are refused), `exp` required, issuer and audience checked when configured.
 * Returns null when no JWT source is configured.
 */
export function createJwtVerifier(opts: JwtOptions): ((token: string) => Promise<boolean>) | null {
  if (!opts.secret && !opts.jwksUrl) return null;
  const claims: JWTVerifyOptions = {
    requiredClaims: ["exp"],
    clockTolerance: 30,
    ...(opts.issuer ? { issuer: opts.issuer } : {}),
    ...(opts.audience ? { audience: opts.audience } : {}),
  };
  const hsKey = opts.secret ? new TextEncoder().encode(opts.secret) : undefined;
  if (hsKey && hsKey.byteLength < 32) throw new Error("SIGNALBOX_JWT_SECRET must be at least 32 bytes");
  const jwks = opts.jwksUrl ? createRemoteJWKSet(new URL(opts.jwksUrl), { timeoutDuration: 3000, cooldownDuration: 30_000 }) : undefined;
  return async (token) => {
    if (!/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(token)) return false;
    if (hsKey && (await jwtVerify(token, hsKey, { ...claims, algorithms: ["HS256"] }).then(() => true, () => false))) return true;
    if (jwks && (await jwtVerify(token, jwks, { ...claims, algorithms: ASYMMETRIC }).then(() => true, () => false))) return true;
    return false;
  };
}
