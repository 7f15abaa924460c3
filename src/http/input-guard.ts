import type { MiddlewareHandler } from "hono";
import { BadRequestError } from "../core/errors.ts";
import { jsonDepthExceeds } from "../core/json-text.ts";
import { escapePointer } from "../core/json-pointer.ts";
import { findUnstorable, isStorable, toStorable } from "../core/storable-text.ts";

/**
 * Management JSON bodies may nest this deep: room for a batch item's payload (which intake
 * itself bounds at 64 levels) inside `{signals: [{payload}]}`, far below what would exhaust
 * the stack in JSON.stringify or Postgres.
 */
export const MAX_MANAGEMENT_JSON_DEPTH = 80;

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * Refuses, with a 400, input that passes the route schemas but that nothing downstream can
 * hold: a `.` or `..` path segment (the URL parser would resolve it to another route), and
 * NUL or unpaired UTF-16 surrogates in the path, the query or a management JSON body (Postgres
 * cannot store NUL in text or jsonb, nor lone surrogates in jsonb), and a management JSON body
 * that is not UTF-8. Routes that read their raw bodies themselves (`skipBody`: intake, approval
 * links) are left alone: they cap them after their own credential and answer in their own way.
 */
export function inputGuard(opts: { skipBody(method: string, path: string): boolean }): MiddlewareHandler {
  return async function inputGuard(c, next) {
    const rawUrl = (c.env as { incoming?: { url?: string } } | undefined)?.incoming?.url ?? new URL(c.req.url).pathname;
    const rawPath = rawUrl.split("?")[0] ?? "";
    if (rawPath.split("/").some((s) => /^(\.|%2e){1,2}$/i.test(s))) {
      throw new BadRequestError("the path must not contain '.' or '..' segments", [{ path: "", message: "has a dot segment" }]);
    }
    if (/%00/.test(rawUrl) || !isStorable(c.req.path)) {
      throw new BadRequestError("the path must not contain NUL or unpaired surrogates", [{ path: "", message: "has an unstorable character" }]);
    }
    for (const [name, values] of Object.entries(c.req.queries())) {
      if (!isStorable(name) || values.some((v) => !isStorable(v))) {
        throw new BadRequestError(`query parameter '${name}' must not contain NUL or unpaired surrogates`, [
          { path: `/${escapePointer(toStorable(name))}`, message: "has an unstorable character" },
        ]);
      }
    }

    const method = c.req.method;
    const hasBody = method === "POST" || method === "PUT" || method === "PATCH";
    if (hasBody && !opts.skipBody(method, c.req.path) && /json/i.test(c.req.header("content-type") ?? "")) {
      // Cached: the route's validator parses the same body. Decoded strictly: leniently, bytes
      // that are not UTF-8 became U+FFFD and were stored so, a body changed without a word.
      let text: string;
      try {
        text = strictUtf8.decode(await c.req.arrayBuffer());
      } catch {
        throw new BadRequestError("the body is not valid UTF-8", [{ path: "", message: "is not valid UTF-8" }]);
      }
      if (jsonDepthExceeds(text, MAX_MANAGEMENT_JSON_DEPTH)) {
        throw new BadRequestError(`the body must not nest deeper than ${MAX_MANAGEMENT_JSON_DEPTH} levels`, [{ path: "", message: "nests too deeply" }]);
      }
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        return next(); // the route's validator answers a malformed body
      }
      const where = findUnstorable(value, "");
      if (where !== null) {
        throw new BadRequestError("the body must not contain NUL or unpaired UTF-16 surrogates", [{ path: where, message: "has an unstorable character" }]);
      }
    }
    return next();
  };
}
