import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import { sql } from "drizzle-orm";
import type { Deps } from "../core/context.ts";
import type { Metrics } from "../core/metrics.ts";
import { noSecurity } from "./openapi.ts";

const metricsRoute = createRoute({
  method: "get",
  path: "/metrics",
  operationId: "getMetrics",
  summary: "Prometheus metrics (text exposition format)",
  description: "Counters and histograms of this process, plus gauges counted in the database (open waits, resolved waits, job queue depth) that cover every process.",
  tags: ["Operations"],
  security: noSecurity,
  responses: {
    200: {
      description: "Metrics",
      content: { "text/plain": { schema: z.string().openapi({ example: "# TYPE signalbox_waits_open gauge\nsignalbox_waits_open 3\n" }) } },
    },
  },
});

/** Gauges that count rows are read from the database at scrape time, so they cover every process. */
async function refreshDatabaseGauges(deps: Pick<Deps, "db">, metrics: Metrics) {
  const waits = await deps.db.execute<{ status: string; n: number }>(sql`
    select status, count(*)::int as n from signalbox.waits group by status`);
  const counts = Object.fromEntries(waits.map((r) => [r.status, Number(r.n)]));
  metrics.waitsOpen.set(counts.waiting ?? 0);
  for (const outcome of ["received", "timed_out", "cancelled"]) metrics.waitsResolved.set({ outcome }, counts[outcome] ?? 0);
  const [jobs] = await deps.db.execute<{ n: number }>(sql`select count(*)::int as n from graphile_worker.jobs`);
  metrics.jobQueueDepth.set(Number(jobs?.n ?? 0));
}

export function metricsRouter(deps: Pick<Deps, "db" | "log">, metrics: Metrics) {
  return new OpenAPIHono().openapi(metricsRoute, async (c) => {
    await refreshDatabaseGauges(deps, metrics).catch((err) => deps.log.warn({ err }, "metrics: database gauges unavailable"));
    return c.text(await metrics.registry.metrics(), 200, { "content-type": metrics.registry.contentType });
  });
}
