import fs from "node:fs";
import { describe, expect, it } from "vitest";
import { openApiDocument, openApiText } from "../../src/openapi-document.ts";

describe("openapi/openapi.json", () => {
  it("is exactly what the routes produce (run `npm run openapi` after changing a route)", () => {
    expect(fs.readFileSync(new URL("../../openapi/openapi.json", import.meta.url), "utf8")).toBe(openApiText());
  });

  it("names every operation uniquely and uses the path parameter names of API.md", () => {
    const doc = openApiDocument() as { paths: Record<string, Record<string, { operationId?: string }>> };
    const ids = Object.values(doc.paths).flatMap((ops) => Object.values(ops).map((o) => o.operationId));
    expect(ids.every((id) => id && /^[a-z][A-Za-z0-9]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    const params = Object.keys(doc.paths).flatMap((p) => [...p.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]));
    // `token`: the signed approval link in /approvals/{token} (API.md gives links as opaque URLs).
    expect(new Set(params)).toEqual(new Set(["run", "signal", "name", "id", "token"]));
  });

  it("lists 413 on every operation that may be sent a body (every POST, PUT and PATCH has its size capped)", () => {
    const doc = openApiDocument() as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    const missing = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops)
        .filter(([method, op]) => ["post", "put", "patch"].includes(method) && !("413" in op.responses))
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    expect(missing).toEqual([]);
  });
});
