import type { MiddlewareHandler } from "hono";
import { UnauthorizedError } from "../core/errors.ts";
import { bearerToken, matchesApiKey } from "./api-keys.ts";

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

/** Verifies a management token: a static key now; JWTs slot in here. */
export function tokenVerifier(apiKeys: readonly string[]) {
  return async (token: string | undefined): Promise<boolean> => token !== undefined && matchesApiKey(token, apiKeys);
}
