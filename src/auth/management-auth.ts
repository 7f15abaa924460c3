import type { MiddlewareHandler } from "hono";
import { UnauthorizedError } from "../core/errors.ts";
import { bearerToken, matchesApiKey } from "./api-keys.ts";
import { createJwtVerifier, type JwtOptions } from "./jwt.ts";

export interface ManagementAuthOptions {
  /** Requests that need no management token (health, docs, intake which has its own auth). */
  skip(method: string, path: string): boolean;
  verify(token: string | undefined): Promise<boolean>;
}

/** Requires `Authorization: Bearer <token>` on every management route; the same 401 everywhere. */
export const managementAuth = (opts: ManagementAuthOptions): MiddlewareHandler =>
  async function managementAuth(c, next) {
    if (opts.skip(c.req.method, c.req.path)) return next();
    if (!(await opts.verify(bearerToken(c.req.header("authorization"))))) throw new UnauthorizedError();
    return next();
  };

/** Verifies a management token: a static key, or a JWT when a JWT source is configured. */
export function tokenVerifier(apiKeys: readonly string[], jwt: JwtOptions = {}) {
  const verifyJwt = createJwtVerifier(jwt);
  return async (token: string | undefined): Promise<boolean> => {
    if (token === undefined || token.length > 8192) return false;
    if (apiKeys.length > 0 && matchesApiKey(token, apiKeys)) return true;
    return verifyJwt ? verifyJwt(token) : false;
  };
}
