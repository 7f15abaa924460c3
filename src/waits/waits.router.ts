import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Deps } from "../deps.ts";
import { BadRequestError } from "../core/errors.ts";
import { bearerSecurity, commonProblems, CursorQuery, defaultHook, holdQuery, HttpUrlInput, InstantInput, json, MetadataInput, LimitQuery, listOf, problems, RunIdSchema, SignalNameSchema, WaitIdSchema } from "../http/openapi.ts";
import { cancelWait, redeliverWait } from "./cancel-wait.ts";
import { findWaits } from "./find-waits.ts";
import { getWait, MAX_WAIT_S } from "./get-wait.ts";
import { openWait, type WaitSpec } from "./open-wait.ts";
import { Members, QuorumSchema, SensorSpecSchema, sources, TimerSpecSchema } from "./wait-spec.schema.ts";
import type { ChangeFeed } from "../events/change-feed.ts";
import { heldSignal } from "../http/held-request.ts";

const Timestamp = z.string().datetime({ offset: true });
const NullableTimestamp = Timestamp.nullable();

export const WaitSchema = z
  .object({
    id: z.string().openapi({ example: "wt_01jb2m3k4n5p6q7r8s9t0v1w2x3y" }),
    run_id: z.string().openapi({ example: "order-17" }),
    signal: z.string().openapi({ example: "manager-approval" }),
    key: z.string().nullable().openapi({ example: "scene-2/approval" }),
    status: z.enum(["waiting", "received", "timed_out", "cancelled"]),
    created_at: Timestamp,
    timeout_at: NullableTimestamp,
    resolved_at: NullableTimestamp,
    metadata: z.record(z.string(), z.unknown()).openapi({ example: { order_id: "o-17", assignee: "kim" } }),
    callback_url: z.string().nullable().openapi({ example: "http://engine:9000/resume" }),
    result: z
      .object({ signal_id: z.string(), sequence: z.number().int(), payload: z.unknown(), received_at: Timestamp })
      .nullable()
      .openapi({ description: "The signal that resolved the wait, once received" }),
    kind: z.enum(["external", "timer", "sensor", "all", "any"]).openapi({ description: "What ends the wait: a sender's signal, a timer, a sensor, or a composite over member waits" }),
    fires_at: NullableTimestamp.openapi({ description: "Timers: when the wait will be received" }),
    parent_wait_id: z.string().nullable().openapi({ description: "Composite members: the composite wait they belong to" }),
    quorum: QuorumSchema.optional(),
    votes: z.record(z.string(), z.array(z.string())).optional().openapi({ description: "Quorum waits: the distinct responders so far, by response", example: { approve: ["kim"] } }),
    delivery: z
      .object({ status: z.enum(["none", "pending", "delivered", "failed"]), attempts: z.number().int(), last_error: z.string().nullable() })
      .openapi({
        description:
          "The resume callback's progress: `attempts` counts every recorded attempt, redeliveries included (`GET /waits/{id}/deliveries` lists them); `last_error` is the latest attempt's",
      }),
    reply: z.unknown().openapi({
      description:
        "The resume callback's reply: the JSON body of its first 2xx answer (`content-type: application/json`, at most 64 KiB), also stored on the signal that resolved the wait. Null until `replied_at`, and when that answer had no JSON body (a body too large or not JSON is not stored; the attempt's `error` says why). A redelivery's answer does not replace it",
    }),
    replied_at: NullableTimestamp.openapi({ description: "When the callback was first delivered: from then `reply` is known" }),
  })
  .openapi("Wait");

const OpenWaitBody = z
  .object({
    signal: SignalNameSchema,
    key: z.string().min(1).max(200).optional().openapi({ description: "The step path: the same run and key return the same wait", example: "scene-2/approval" }),
    timeout_s: z.number().min(0).max(10 * 365 * 86400).optional().openapi({ example: 172800 }),
    timeout_at: InstantInput.optional().openapi({ description: "Absolute deadline (RFC 3339); a past one times out at once" }),
    // Case-insensitive without the `i` flag: flags do not survive into the OpenAPI `pattern`.
    callback_url: HttpUrlInput().optional().openapi({ example: "http://engine:9000/resume" }),
    metadata: MetadataInput.optional().openapi({ example: { order_id: "o-17", assignee: "kim" } }),
    timer: TimerSpecSchema.optional(),
    sensor: SensorSpecSchema.optional(),
    all: Members.optional().openapi({ description: "A composite: received when every member is received (payload `{members: {<signal>: <result>}}`); a member timing out times it out" }),
    any: Members.optional().openapi({ description: "A composite: received with the first member received; the other members are cancelled" }),
    quorum: QuorumSchema.optional(),
  })
  .strict()
  .refine((b) => sources(b) <= 1, { message: "give at most one of timer, sensor, all, any", path: ["timer"] })
  .refine((b) => b.quorum === undefined || sources(b) === 0, { message: "a quorum applies to a wait for an external signal", path: ["quorum"] })
  .refine((b) => b.timeout_s === undefined || b.timeout_at === undefined, { message: "give timeout_s or timeout_at, not both", path: ["timeout_at"] })
  .refine((b) => b.metadata === undefined || JSON.stringify(b.metadata).length <= 16384, { message: "must be at most 16 KiB as JSON", path: ["metadata"] })
  .openapi("OpenWait");

const RunParams = z.object({ run: RunIdSchema.openapi({ param: { name: "run", in: "path" } }) });
const IdParams = z.object({ id: WaitIdSchema.openapi({ param: { name: "id", in: "path" } }) });
const StatusQuery = z.enum(["waiting", "received", "timed_out", "cancelled"]).optional();
const DeliveryQuery = z
  .enum(["none", "pending", "delivered", "failed"])
  .optional()
  .openapi({ description: "Only waits whose resume callback's `delivery.status` is this" });

/** The documented request (a complete, valid one: a reference's generated sample would combine every field). */
const OPEN_WAIT_EXAMPLE = {
  signal: "manager-approval",
  key: "scene-2/approval",
  timeout_s: 172800,
  callback_url: "http://engine:9000/resume",
  metadata: { order_id: "o-17", assignee: "kim" },
};

const open = createRoute({
  method: "post",
  path: "/runs/{run}/waits",
  operationId: "openWait",
  summary: "Open a wait: the run pauses until a signal, a timeout or a cancel",
  description:
    "At most one open wait per run and signal name (409 otherwise). The same run and `key` again return the same wait (200). `timeout_s` or `timeout_at` time it out; a deadline already past times it out at once. When the wait leaves `waiting`, `callback_url` receives a Standard Webhooks-signed POST `{id, type, occurred_at, wait}`. A buffered signal is consumed at once: the new wait is then already `received`.",
  tags: ["Waits"],
  security: bearerSecurity,
  request: { params: RunParams, body: { content: { "application/json": { schema: OpenWaitBody, example: OPEN_WAIT_EXAMPLE } }, required: true } },
  responses: {
    201: json(WaitSchema, "Opened (already `received` if a buffered signal was waiting)"),
    200: json(WaitSchema, "A wait with this run and key exists: that wait"),
    ...commonProblems,
    404: problems[404],
    409: problems[409],
    413: problems[413],
  },
});

const get = createRoute({
  method: "get",
  path: "/waits/{id}",
  operationId: "getWait",
  summary: "Read a wait; with wait_s, long-poll until it leaves waiting",
  description: "With `wait_s`, the request is held while the wait is `waiting` and answers as soon as it is received, timed out or cancelled (or when `wait_s` passes, with the wait as it is).",
  tags: ["Waits"],
  security: bearerSecurity,
  request: {
    params: IdParams,
    query: z.object({ wait_s: holdQuery(MAX_WAIT_S, "the wait is waiting") }),
  },
  responses: { 200: json(WaitSchema, "The wait"), ...commonProblems, 404: problems[404] },
});

const cancel = createRoute({
  method: "post",
  path: "/waits/{id}/cancel",
  operationId: "cancelWait",
  summary: "Cancel a waiting wait (callback signal.cancelled)",
  tags: ["Waits"],
  security: bearerSecurity,
  request: { params: IdParams },
  responses: { 200: json(WaitSchema, "Cancelled"), ...commonProblems, 404: problems[404], 409: problems[409], 413: problems[413] },
});

const redeliver = createRoute({
  method: "post",
  path: "/waits/{id}/redeliver",
  operationId: "redeliverWait",
  summary: "Send the callback again, now",
  description:
    "Allowed once the wait has left `waiting` and has a `callback_url`, whatever its `delivery.status`: after it `failed` or was `delivered`, and while a retry is `pending` (the retry is sent now instead of after its backoff). It starts a new round of attempts: up to `SIGNALBOX_DELIVERY_MAX_ATTEMPTS` more, the backoff starting again from `SIGNALBOX_DELIVERY_BACKOFF_S`. Earlier attempts stay listed in `GET /waits/{id}/deliveries` and their numbers go on; `delivery.attempts` counts them all. The `webhook-id` is the same as before. An attempt already in flight is not stopped: the endpoint may then get the callback twice. That attempt belongs to the earlier round: if it does not deliver, it stays listed but neither fails the new round nor counts against it, and the callback is still sent.",
  tags: ["Waits"],
  security: bearerSecurity,
  request: { params: IdParams },
  responses: { 202: json(WaitSchema, "Delivery queued"), ...commonProblems, 404: problems[404], 409: problems[409], 413: problems[413] },
});

const listForRun = createRoute({
  method: "get",
  path: "/runs/{run}/waits",
  operationId: "listRunWaits",
  summary: "ListWaitingSignals: a run's waits, oldest first",
  tags: ["Waits"],
  security: bearerSecurity,
  request: { params: RunParams, query: z.object({ status: StatusQuery, limit: LimitQuery, cursor: CursorQuery }) },
  responses: { 200: json(listOf(WaitSchema, "WaitList"), "A page of waits"), ...commonProblems },
});

const find = createRoute({
  method: "get",
  path: "/waits",
  operationId: "findWaits",
  summary: "FindRunsWaitingFor: waits across runs, oldest first",
  description: "Filter metadata with `metadata.<key>=<value>` query parameters (string equality, all must match).",
  tags: ["Waits"],
  security: bearerSecurity,
  request: {
    query: z.object({
      signal: SignalNameSchema.optional(),
      status: StatusQuery,
      delivery: DeliveryQuery,
      run_id: RunIdSchema.optional(),
      deadline_before: InstantInput.optional().openapi({ description: "Only waits whose timeout_at is before this instant" }),
      created_before: InstantInput.optional().openapi({ description: "Only waits created before this instant" }),
      limit: LimitQuery,
      cursor: CursorQuery,
    }),
  },
  responses: { 200: json(listOf(WaitSchema, "WaitList"), "A page of waits"), ...commonProblems },
});

/** `metadata.<key>=<value>` query parameters, as a containment filter. */
function metadataFilter(query: Record<string, string[]>): Record<string, string> | undefined {
  const out: Record<string, string> = {};
  for (const [name, values] of Object.entries(query)) {
    if (!name.startsWith("metadata.")) continue;
    const key = name.slice("metadata.".length);
    if (key.length === 0 || key.length > 100 || key === "__proto__" || values.length !== 1) {
      throw new BadRequestError(`query parameter '${name}' must name a key and appear once`, [{ path: `/${name}`, message: "is invalid" }]);
    }
    out[key] = values[0]!;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

export function waitsRouter(deps: Deps & { changes: ChangeFeed; shutdown: AbortSignal }) {
  return new OpenAPIHono({ defaultHook })
    .openapi(open, async (c) => {
      const body = c.req.valid("json");
      const { wait, created } = await openWait(deps, {
        ...toWaitSpec(body),
        runId: c.req.valid("param").run,
        key: body.key,
        callbackUrl: body.callback_url,
        all: body.all?.map(toWaitSpec),
        any: body.any?.map(toWaitSpec),
        quorum: body.quorum,
      });
      return c.json(wait, created ? 201 : 200);
    })
    .openapi(get, async (c) => {
      const signal = heldSignal(c.req.raw, deps.shutdown);
      return c.json(await getWait(deps, c.req.valid("param").id, c.req.valid("query").wait_s ?? 0, signal), 200);
    })
    .openapi(cancel, async (c) => c.json(await cancelWait(deps, c.req.valid("param").id), 200))
    .openapi(redeliver, async (c) => c.json(await redeliverWait(deps, c.req.valid("param").id), 202))
    .openapi(listForRun, async (c) => c.json(await findWaits(deps, { runId: c.req.valid("param").run, ...c.req.valid("query") }), 200))
    .openapi(find, async (c) => {
      const q = c.req.valid("query");
      return c.json(
        await findWaits(deps, {
          signal: q.signal,
          status: q.status,
          delivery: q.delivery,
          runId: q.run_id,
          metadata: metadataFilter(c.req.queries()),
          deadlineBefore: q.deadline_before ? new Date(q.deadline_before) : undefined,
          createdBefore: q.created_before ? new Date(q.created_before) : undefined,
          limit: q.limit,
          cursor: q.cursor,
        }),
        200,
      );
    });
}

/** API field names to the verb's. */
function toWaitSpec(b: z.infer<typeof Members>[number]): WaitSpec {
  return {
    signal: b.signal,
    timeoutS: b.timeout_s,
    timeoutAt: b.timeout_at === undefined ? undefined : new Date(b.timeout_at),
    metadata: b.metadata,
    timer: b.timer,
    sensor: b.sensor,
  };
}
