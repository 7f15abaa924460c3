import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { json, noSecurity } from "./openapi.ts";

const Health = z
  .object({
    status: z.enum(["ok", "unavailable"]),
    checks: z.record(z.string(), z.boolean()).optional().openapi({ description: "Readiness only: each dependency and whether it answered" }),
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
  description: "200 when the database answers and the job worker (timeouts, callbacks) is running, else 503 with the failing check. Use it as the readiness probe.",
  tags: ["Operations"],
  security: noSecurity,
  responses: { 200: json(Health, "Ready"), 503: json(Health, "Not ready") },
});

export interface ReadinessChecks {
  database(): Promise<boolean>;
  worker(): boolean;
}

export function healthRouter(checks: ReadinessChecks) {
  return new OpenAPIHono()
    .openapi(healthz, (c) => c.json({ status: "ok" as const }, 200))
    .openapi(readyz, async (c) => {
      const database = await checks.database().catch(() => false);
      const worker = checks.worker();
      const ok = database && worker;
      return c.json({ status: ok ? ("ok" as const) : ("unavailable" as const), checks: { database, worker } }, ok ? 200 : 503);
    });
}
