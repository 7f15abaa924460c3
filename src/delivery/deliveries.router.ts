import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Deps } from "../deps.ts";
import { bearerSecurity, commonProblems, CursorQuery, defaultHook, json, LimitQuery, listOf, problems, RunIdSchema, WaitIdSchema } from "../http/openapi.ts";
import { getStart, redeliverStart } from "./deliver-start.ts";
import { findFailingDeliveries, listStartDeliveries, listWaitDeliveries } from "./list-deliveries.ts";

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

const StartAttemptSchema = DeliveryAttemptSchema.omit({ wait_id: true })
  .extend({ run_id: z.string().openapi({ description: "The run whose `run.start` event the attempt carried", example: "order-17" }) })
  .openapi("StartDeliveryAttempt");

const StartSchema = z
  .object({
    run_id: z.string().openapi({ example: "order-17" }),
    signal_id: z.string().openapi({ description: "The `started` signal", example: "sg_01jb2m3k4n5p6q7r8s9t0v1w2x3y" }),
    signal: z.string().openapi({ example: "order-placed" }),
    callback_host: z.string().openapi({ description: "The start URL's host[:port] (never its credentials, path or query)", example: HOST_EXAMPLE }),
    webhook_id: z.string().openapi({ description: "The `run.start` event's id (the run's `run.started` history event): the `webhook-id` of every attempt", example: "ev_17" }),
    occurred_at: Timestamp,
    delivery: z.object({
      status: z.enum(["pending", "delivered", "failed"]),
      attempts: z.number().int().openapi({ description: "Attempts recorded, redeliveries included", example: 1 }),
      last_error: z.string().nullable(),
    }),
  })
  .openapi("RunStart", { description: "Signal-with-start: the run's one `run.start` event and its delivery to the signal type's start URL" });

const FailingDeliverySchema = z
  .object({
    kind: z.enum(["callback", "start"]).openapi({
      description: "`callback`: a wait's resume callback (`POST /waits/{id}/redeliver`); `start`: a run's `run.start` event (`POST /runs/{run}/start/redeliver`)",
    }),
    wait_id: z.string().nullable().openapi({ description: "The wait whose callback it is; null for a `start`", example: "wt_01jb2m3k4n5p6q7r8s9t0v1w2x3y" }),
    run_id: z.string().openapi({ example: "order-17" }),
    signal: z.string().openapi({ example: "manager-approval" }),
    status: z.enum(["pending", "failed"]).openapi({ description: "The wait's (or the run start's) `delivery.status`" }),
    callback_host: z.string().openapi({ example: HOST_EXAMPLE }),
    attempts: z.number().int().openapi({ description: "Attempts recorded for the wait (or the run start), redeliveries included", example: 3 }),
    last_error: z.string().nullable().openapi({ example: "HTTP 503" }),
    last_status_code: z.number().int().nullable().openapi({ example: 503 }),
    last_attempt_at: Timestamp,
  })
  .openapi("FailingDelivery");

const IdParams = z.object({ id: WaitIdSchema.openapi({ param: { name: "id", in: "path" } }) });
const RunParams = z.object({ run: RunIdSchema.openapi({ param: { name: "run", in: "path" } }) });

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
  summary: "Resume callbacks and run starts failing now, across waits, by their last attempt's time",
  description:
    "Waits whose callback delivery's latest attempt did not deliver: `failed` (given up: `POST /waits/{id}/redeliver` sends it again) and `pending` (a retry, or a redelivery, is due). Run starts (signal-with-start: `kind` `start`, `wait_id` null) are listed the same way (`POST /runs/{run}/start/redeliver`). A pending delivery not yet attempted, or redelivered after it was delivered, is not listed (`GET /waits?delivery=pending` lists every pending one). Oldest last attempt first, keyset-paginated.",
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

const startOfRun = createRoute({
  method: "get",
  path: "/runs/{run}/start",
  operationId: "getRunStart",
  summary: "A run's start (signal-with-start) and its delivery",
  description:
    "Set when a signal of a type that declares `start` found the run never seen (outcome `started`): the `run.start` event POSTed to the type's start URL, and how its delivery stands. 404 for a run no signal started.",
  tags: ["Runs"],
  security: bearerSecurity,
  request: { params: RunParams },
  responses: { 200: json(StartSchema, "The run's start"), ...commonProblems, 404: problems[404] },
});

const startDeliveries = createRoute({
  method: "get",
  path: "/runs/{run}/start/deliveries",
  operationId: "listRunStartDeliveries",
  summary: "Every attempt to deliver a run's `run.start` event, oldest first",
  description: "As `GET /waits/{id}/deliveries` for a callback: one item per recorded attempt; redeliveries add attempts (numbers go on).",
  tags: ["Runs"],
  security: bearerSecurity,
  request: { params: RunParams, query: z.object({ limit: LimitQuery, cursor: CursorQuery }) },
  responses: { 200: json(listOf(StartAttemptSchema, "StartDeliveryAttemptList"), "A page of attempts"), ...commonProblems, 404: problems[404] },
});

const redeliverStartRoute = createRoute({
  method: "post",
  path: "/runs/{run}/start/redeliver",
  operationId: "redeliverRunStart",
  summary: "Send a run's `run.start` event again",
  description:
    "As `POST /waits/{id}/redeliver` for a callback: allowed whatever the start's `delivery.status` (after it `failed` or was `delivered`, and while a retry is `pending`, which is then sent now). It starts a new round of up to `SIGNALBOX_DELIVERY_MAX_ATTEMPTS` attempts with the backoff from the start; the `webhook-id` stays the same and attempt numbers go on.",
  tags: ["Runs"],
  security: bearerSecurity,
  request: { params: RunParams },
  responses: { 202: json(StartSchema, "Queued: the start, its delivery `pending`"), ...commonProblems, 404: problems[404], 413: problems[413] },
});

const RunStartEventSchema = z
  .object({
    id: z.string().openapi({ description: "The event id: also the `webhook-id` header, the same on every attempt (deduplicate on it)", example: "ev_17" }),
    type: z.literal("run.start"),
    occurred_at: Timestamp,
    run_id: z.string().openapi({ example: "order-17" }),
    signal: z
      .object({
        id: z.string().openapi({ example: "sg_01jb2m3k4n5p6q7r8s9t0v1w2x3y" }),
        name: z.string().openapi({ example: "order-placed" }),
        payload: z.unknown().openapi({ description: "The signal's payload, as sent", example: { order_id: "o-17" } }),
      })
      .openapi({ description: "The `started` signal: the run's first wait of this name receives it at once" }),
  })
  .openapi("RunStartEvent");

/** The run.start event (signal-with-start), as the document's webhooks show what signalbox sends. */
const runStartWebhook = {
  method: "post" as const,
  path: "run.start",
  operationId: "runStartEvent",
  summary: "Start a run: a signal came for a run signalbox has never seen",
  description:
    "POSTed to a signal type's `start.url` when a signal of that type finds a run never seen (outcome `started`). Signed per Standard Webhooks with `SIGNALBOX_CALLBACK_SECRET` (`webhook-id`, `webhook-timestamp`, `webhook-signature`), retried like resume callbacks, at least once. Start the run; its first wait of the signal's name receives this signal at once.",
  tags: ["Runs"],
  // Signed per Standard Webhooks, not sent with a bearer token: the engine verifies the signature.
  security: [],
  request: { body: { required: true, content: { "application/json": { schema: RunStartEventSchema } } } },
  responses: { 200: { description: "Any 2xx: delivered. 408, 429, 5xx or no answer: retried; another 4xx: failed" } },
};

export function deliveriesRouter(deps: Pick<Deps, "db">) {
  const app = new OpenAPIHono({ defaultHook });
  app.openAPIRegistry.registerWebhook(runStartWebhook);
  return app
    .openapi(startOfRun, async (c) => c.json(await getStart(deps, c.req.valid("param").run), 200))
    .openapi(startDeliveries, async (c) => c.json(await listStartDeliveries(deps, c.req.valid("param").run, c.req.valid("query")), 200))
    .openapi(redeliverStartRoute, async (c) => c.json(await redeliverStart(deps, c.req.valid("param").run), 202))
    .openapi(forWait, async (c) => c.json(await listWaitDeliveries(deps, c.req.valid("param").id, c.req.valid("query")), 200))
    .openapi(failing, async (c) => {
      const q = c.req.valid("query");
      return c.json(await findFailingDeliveries(deps, { status: q.status, callbackHost: q.callback_host, limit: q.limit, cursor: q.cursor }), 200);
    });
}
