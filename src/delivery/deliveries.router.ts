import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Deps } from "../deps.ts";
import { bearerSecurity, commonProblems, CursorQuery, defaultHook, json, LimitQuery, listOf, problems, WaitIdSchema } from "../http/openapi.ts";
import { findFailingDeliveries, listWaitDeliveries } from "./list-deliveries.ts";

const Timestamp = z.string().datetime({ offset: true });
const HOST_EXAMPLE = "engine.internal:9000";

const DeliveryAttemptSchema = z
  .object({
    id: z.string().openapi({ example: "dl_42" }),
    wait_id: z.string().openapi({ example: "wt_01jb2m3k4n5p6q7r8s9t0v1w2x3y" }),
    attempt: z.number().int().min(1).openapi({ description: "1, 2, 3... for the wait; a redelivery's attempts go on numbering", example: 1 }),
    webhook_id: z.string().openapi({ description: "The `webhook-id` the callback carried (its event id: the same on every attempt)", example: "ev_17" }),
    started_at: Timestamp,
    duration_ms: z.number().int().min(0).openapi({ description: "From sending the request to the answer's status line, or to the error", example: 12 }),
    status_code: z.number().int().nullable().openapi({ description: "The endpoint's HTTP status; null when no answer came (refused, reset, no answer within 10 s)", example: 503 }),
    error: z.string().nullable().openapi({ description: "Why the attempt did not deliver; null when it did", example: "HTTP 503" }),
    outcome: z.enum(["delivered", "retry", "failed"]).openapi({
      description: "What the attempt made of the delivery: `delivered` (2xx), `retry` (408, 429, 5xx or no answer: another attempt is due), `failed` (another 4xx, or the round's last attempt: the delivery gave up)",
    }),
    callback_host: z.string().openapi({ description: "The callback URL's host[:port] (never its credentials, path or query)", example: HOST_EXAMPLE }),
  })
  .openapi("DeliveryAttempt");

const FailingDeliverySchema = z
  .object({
    wait_id: z.string().openapi({ example: "wt_01jb2m3k4n5p6q7r8s9t0v1w2x3y" }),
    run_id: z.string().openapi({ example: "order-17" }),
    signal: z.string().openapi({ example: "manager-approval" }),
    status: z.enum(["pending", "failed"]).openapi({ description: "The wait's `delivery.status`" }),
    callback_host: z.string().openapi({ example: HOST_EXAMPLE }),
    attempts: z.number().int().openapi({ description: "Attempts recorded for the wait, redeliveries included", example: 3 }),
    last_error: z.string().nullable().openapi({ example: "HTTP 503" }),
    last_status_code: z.number().int().nullable().openapi({ example: 503 }),
    last_attempt_at: Timestamp,
  })
  .openapi("FailingDelivery");

const IdParams = z.object({ id: WaitIdSchema.openapi({ param: { name: "id", in: "path" } }) });

const forWait = createRoute({
  method: "get",
  path: "/waits/{id}/deliveries",
  operationId: "listWaitDeliveries",
  summary: "Every attempt to deliver a wait's resume callback, oldest first",
  description:
    "One item per recorded attempt: when it started, how long it took, the endpoint's status code or the error, and its outcome. Redeliveries add attempts (numbers go on); nothing is removed until the wait itself is purged by retention. An attempt still in flight is not listed yet.",
  tags: ["Waits"],
  security: bearerSecurity,
  request: { params: IdParams, query: z.object({ limit: LimitQuery, cursor: CursorQuery }) },
  responses: { 200: json(listOf(DeliveryAttemptSchema, "DeliveryAttemptList"), "A page of attempts"), ...commonProblems, 404: problems[404] },
});

const failing = createRoute({
  method: "get",
  path: "/deliveries",
  operationId: "listFailingDeliveries",
  summary: "Resume callbacks failing now, across waits, by their last attempt's time",
  description:
    "Waits whose callback delivery's latest attempt did not deliver: `failed` (given up: `POST /waits/{id}/redeliver` sends it again) and `pending` (a retry, or a redelivery, is due). A pending delivery not yet attempted, or redelivered after it was delivered, is not listed (`GET /waits?delivery=pending` lists every pending one). Oldest last attempt first, keyset-paginated.",
  tags: ["Waits"],
  security: bearerSecurity,
  request: {
    query: z.object({
      status: z.enum(["failed", "pending"]).optional().openapi({ description: "Only deliveries in this status (default: both)" }),
      callback_host: z
        .string()
        .min(1)
        .max(300)
        .regex(/^[A-Za-z0-9._~:[\]-]+$/, "must be a host or host:port")
        .optional()
        .openapi({ description: "Only callbacks to this host[:port], as the URL names it (the port only when not the scheme's default); case-insensitive", example: HOST_EXAMPLE }),
      limit: LimitQuery,
      cursor: CursorQuery,
    }),
  },
  responses: { 200: json(listOf(FailingDeliverySchema, "FailingDeliveryList"), "A page of failing deliveries"), ...commonProblems },
});

export function deliveriesRouter(deps: Pick<Deps, "db">) {
  return new OpenAPIHono({ defaultHook })
    .openapi(forWait, async (c) => c.json(await listWaitDeliveries(deps, c.req.valid("param").id, c.req.valid("query")), 200))
    .openapi(failing, async (c) => {
      const q = c.req.valid("query");
      return c.json(await findFailingDeliveries(deps, { status: q.status, callbackHost: q.callback_host, limit: q.limit, cursor: q.cursor }), 200);
    });
}
