import type { MiddlewareHandler } from "hono";

/**
 * Every console response: scripts and styles only from our own files (no inline script or
 * style, so an injected tag could not run), requests only to this origin (the SSE feed), forms
 * only to us, never framed, never cached (pages show live state and a CSRF token).
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

export const securityHeaders = (): MiddlewareHandler =>
  async function consoleSecurityHeaders(c, next) {
    await next();
    c.res.headers.set("content-security-policy", CONSOLE_CSP);
    c.res.headers.set("x-content-type-options", "nosniff");
    c.res.headers.set("referrer-policy", "same-origin");
    c.res.headers.set("x-frame-options", "DENY");
    c.res.headers.set("cross-origin-opener-policy", "same-origin");
    if (!c.res.headers.has("cache-control")) c.res.headers.set("cache-control", "no-store");
  };
