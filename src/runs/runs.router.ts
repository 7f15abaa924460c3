import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Deps } from "../core/context.ts";
import { bearerSecurity, commonProblems, defaultHook, json, problems, RunIdSchema } from "../http/openapi.ts";
import { cancelRun } from "./cancel-run.ts";
import { getRun, getRunEvents } from "./get-run.ts";

const RunSchema = z
  .object({
    run_id: z.string().openapi({ example: "order-17" }),
    status: z.enum(["active", "cancelled"]),
    control: z.object({
      is_paused: z.boolean(),
      paused_at: z.string().nullable(),
      pause_reason: z.string().nullable(),
      paused_by: z.string().nullable(),
      is_cancelled: z.boolean(),
      cancel_reason: z.string().nullable(),
      cancelled_by: z.string().nullable(),
    }),
    parent_run_id: z.string().nullable(),
    children: z.array(z.string()),
    open_waits: z.number().int(),
  })
  .openapi("Run");

const EventSchema = z
  .object({
    id: z.string().openapi({ example: "ev_42" }),
    run_id: z.string(),
    type: z.enum(["signal.waiting", "signal.received", "signal.buffered", "signal.timeout", "signal.cancelled", "run.cancelled"]),
    wait_id: z.string().nullable(),
    signal_id: z.string().nullable(),
    data: z.record(z.string(), z.unknown()),
    occurred_at: z.string().datetime({ offset: true }),
  })
  .openapi("RunEvent");

const RunParams = z.object({ run: RunIdSchema.openapi({ param: { name: "run", in: "path" } }) });

const get = createRoute({
  method: "get",
  path: "/runs/{run}",
  operationId: "getRun",
  summary: "A run's state and control",
  tags: ["Runs"],
  security: bearerSecurity,
  request: { params: RunParams },
  responses: { 200: json(RunSchema, "The run"), ...commonProblems, 404: problems[404] },
});

const cancel = createRoute({
  method: "post",
  path: "/runs/{run}/cancel",
  operationId: "cancelRun",
  summary: "Cancel a run: its open waits are cancelled, later signals rejected",
  tags: ["Runs"],
  security: bearerSecurity,
  request: {
    params: RunParams,
    body: {
      content: { "application/json": { schema: z.object({ reason: z.string().max(1000).optional(), by: z.string().max(200).optional() }).strict().openapi("CancelRun") } },
      required: false,
    },
  },
  responses: { 200: json(RunSchema, "Cancelled (cancelling again changes nothing)"), ...commonProblems },
});

const events = createRoute({
  method: "get",
  path: "/runs/{run}/events",
  operationId: "listRunEvents",
  summary: "The run's history, oldest first",
  tags: ["Runs"],
  security: bearerSecurity,
  request: {
    params: RunParams,
    query: z.object({
      after: z.string().max(30).optional().openapi({ description: "Only events after this event id" }),
      limit: z.coerce.number().int().min(1).max(500).default(50),
    }),
  },
  responses: {
    200: json(z.object({ items: z.array(EventSchema), next_cursor: z.string().nullable().openapi({ description: "Pass as ?after= for the next page" }) }).openapi("RunEventList"), "A page of events"),
    ...commonProblems,
  },
});

export function runsRouter(deps: Deps) {
  return new OpenAPIHono({ defaultHook })
    .openapi(get, async (c) => c.json(await getRun(deps, c.req.valid("param").run), 200))
    .openapi(cancel, async (c) => {
      const body = c.req.header("content-type")?.includes("json") ? c.req.valid("json") : {};
      return c.json(await cancelRun(deps, { runId: c.req.valid("param").run, reason: body.reason, by: body.by }), 200);
    })
    .openapi(events, async (c) => {
      const q = c.req.valid("query");
      return c.json(await getRunEvents(deps, c.req.valid("param").run, q.after, q.limit), 200);
    });
}
