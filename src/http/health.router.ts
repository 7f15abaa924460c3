import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { json, noSecurity } from "./openapi.ts";

const Health = z
  .object({
    status: z.enum(["ok", "unavailable"]),
    checks: z.record(z.string(), z.boolean()).optional().openapi({ description: "Readiness only: each dependency and whether it answered" }),
    parts: z
      .record(z.string(), z.union([z.boolean(), z.number()]))
      .optional()
      .openapi({ description: "Readiness only, when not ready or with `verbose`: each moving part behind the checks (database reachable, LISTEN connection, job runner up, polling, listening, restarts)" }),
  })
  .openapi("Health", { example: { status: "ok", checks: { database: true, worker: true } } });

const healthz = createRoute({
  method: "get",
  path: "/healthz",
  operationId: "getHealth",
  summary: "Liveness: the process is up",
  description: "Answers 200 while the process serves HTTP; it does not touch the database. Use it as the liveness probe.",
  tags: ["Operations"],
  security: noSecurity,
  responses: { 200: json(Health, "Up") },
});

const readyz = createRoute({
  method: "get",
  path: "/readyz",
  operationId: "getReadiness",
  summary: "Readiness: the database and the job worker are reachable",
  description:
    "200 when the database answers (and this process's LISTEN connection delivers) and the job worker (timeouts, callbacks) is running and finds jobs, else 503 with the failing check and each part behind it. Answers within about a second. Use it as the readiness probe.",
  tags: ["Operations"],
  security: noSecurity,
  // Given twice (a proxy adding its own), it is still present: the public probe answers 200 or 503 only.
  request: { query: z.object({ verbose: z.union([z.string(), z.array(z.string())]).optional().openapi({ description: "Present: list every part behind the checks, also when ready" }) }) },
  responses: { 200: json(Health, "Ready"), 503: json(Health, "Not ready") },
});

export interface ReadinessChecks {
  database(): Promise<boolean>;
  worker(): boolean;
  /** Each moving part behind the two checks, for operators (optional). */
  parts?(): Promise<Record<string, boolean | number>>;
}

export function healthRouter(checks: ReadinessChecks) {
  return new OpenAPIHono()
    .openapi(healthz, (c) => c.json({ status: "ok" as const }, 200))
    .openapi(readyz, async (c) => {
      const [database, parts] = await Promise.all([checks.database().catch(() => false), checks.parts?.().catch(() => undefined)]);
      const worker = checks.worker();
      const ok = database && worker;
      const detail = parts && (!ok || c.req.valid("query").verbose !== undefined) ? { parts } : {};
      return c.json({ status: ok ? ("ok" as const) : ("unavailable" as const), checks: { database, worker }, ...detail }, ok ? 200 : 503);
    });
}
