import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Deps } from "../deps.ts";
import type { Metrics } from "../core/metrics.ts";
import { databaseGauges } from "../operations/database-gauges.ts";
import { noSecurity, problems } from "./openapi.ts";

const metricsRoute = createRoute({
  method: "get",
  path: "/metrics",
  operationId: "getMetrics",
  summary: "Prometheus metrics (text exposition format)",
  description: "Counters and histograms of this process, plus gauges counted in the database (open waits, resolved waits, job queue depth) that cover every process, counted at most every 5 s.",
  tags: ["Operations"],
  security: noSecurity,
  responses: {
    200: {
      description: "Metrics",
      content: { "text/plain": { schema: z.string().openapi({ example: "# TYPE signalbox_waits_open gauge\nsignalbox_waits_open 3\n" }) } },
    },
    429: problems[429],
  },
});

export function metricsRouter(deps: Pick<Deps, "db" | "log">, metrics: Metrics) {
  const refreshGauges = databaseGauges(deps, metrics);
  return new OpenAPIHono().openapi(metricsRoute, async (c) => {
    await refreshGauges();
    return c.text(await metrics.registry.metrics(), 200, { "content-type": metrics.registry.contentType });
  });
}
