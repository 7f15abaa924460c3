import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Deps } from "../deps.ts";
import { bearerSecurity, commonProblems, defaultHook, json, problems, RunIdSchema, SignalNameSchema } from "../http/openapi.ts";
import { runEventStream } from "./run-event-stream.ts";
import { BadRequestError } from "../core/errors.ts";
import type { ChangeFeed } from "../events/change-feed.ts";
import { EVENT_TYPES, parseEventId } from "../events/events.queries.ts";
import { checkpoint, MAX_CHECKPOINT_WAIT_S } from "./checkpoint.ts";
import { cancelRun, pauseRun, resumeRun } from "./control-run.ts";
import { getRun, getRunEvents } from "./get-run.ts";
import { registerChild, unregisterChild } from "./run-children.ts";
import { continueRun } from "./continue-run.ts";
import { heldSignal } from "../http/held-request.ts";

const RunSchema = z
  .object({
    run_id: z.string().openapi({ example: "order-17" }),
    status: z.enum(["active", "cancelled", "continued"]).openapi({
      description: "`continued`: POST /runs/{run}/continue handed its work to `continued_as`; it is final, like `cancelled`",
    }),
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
    continued_as: z.string().nullable().openapi({ description: "The run this one was continued as (its direct successor), or null" }),
    continued_at: z.string().datetime({ offset: true }).nullable(),
    continued_from: z.string().nullable().openapi({ description: "The run that was continued as this one (its direct predecessor), or null" }),
    newest_run_id: z.string().openapi({
      description: "The newest run of this run's chain, where signals and waits addressed to this run go: `run_id` itself when it was never continued",
    }),
    children: z.array(z.string()),
    open_waits: z.number().int(),
  })
  .openapi("Run");

const EventSchema = z
  .object({
    id: z.string().openapi({ example: "ev_42" }),
    run_id: z.string(),
    type: z.enum(EVENT_TYPES),
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

const ControlBody = z
  .object({ reason: z.string().max(1000).optional(), by: z.string().max(200).optional() })
  .strict()
  .openapi("RunControl", { example: { reason: "provider outage", by: "kim@example.com" } });
/** Each verb's documented request (resume takes no reason). */
const CONTROL_EXAMPLES = {
  pause: { reason: "provider outage", by: "kim@example.com" },
  resume: { by: "kim@example.com" },
  cancel: { reason: "order withdrawn", by: "kim@example.com" },
};
const controlBody = (verb: keyof typeof CONTROL_EXAMPLES) => ({ content: { "application/json": { schema: ControlBody, example: CONTROL_EXAMPLES[verb] } }, required: false });

const controlRoute = (verb: "pause" | "resume" | "cancel", summary: string, ok: string) =>
  createRoute({
    method: "post",
    path: `/runs/{run}/${verb}`,
    operationId: `${verb}Run`,
    summary,
    tags: ["Runs"],
    security: bearerSecurity,
    request: { params: RunParams, body: controlBody(verb) },
    responses: { 200: json(RunSchema, ok), ...commonProblems, 409: problems[409], 413: problems[413] },
  });

const pause = controlRoute("pause", "Pause a run and its descendants (takes effect at checkpoints)", "Paused (pausing again changes nothing)");
const resume = controlRoute("resume", "Resume a run and its descendants", "Resumed");
const cancel = controlRoute("cancel", "Cancel a run and its descendants: open waits are cancelled, later signals rejected", "Cancelled (cancelling again changes nothing)");

const ContinueBody = z
  .object({
    run_id: RunIdSchema.openapi({ description: "The new run (it may exist already, e.g. with waits of its own)", example: "order-17-2" }),
    by: z.string().max(200).optional(),
    reason: z.string().max(1000).optional(),
  })
  .strict()
  .openapi("RunContinue");
const continueRoute = createRoute({
  method: "post",
  path: "/runs/{run}/continue",
  operationId: "continueRun",
  summary: "Continue a run as a new run (continue-as-new): its waits are cancelled, its buffered signals and everything later go to the new run",
  description: [
    "Marks the run `continued` (final) with `continued_as`, in one transaction under both runs' locks. Its open waits are cancelled, with reason `continued` in their `signal.cancelled` event and callback as for any cancel. Its buffered signals still within their TTL move to the new run, oldest first, each taking the new run's next `sequence` and `received_at` now (after the new run's own signals; the TTL still counts from when it first came); one that finds the new run waiting for its name is received by that wait at once. A buffered signal whose idempotency key the new run already holds for that name is not moved: it would be the same delivery twice (it stays behind and expires).",
    "From then on every signal (`POST /signals/{run}/{signal}`, the batch, approval links, redrive) and every wait (`POST /runs/{run}/waits`, its `key` included) addressed to the old run, or to any run of its chain, applies to the newest run of the chain; intake answers name it in `run_id`. Control verbs (pause, resume, cancel, children) do not follow the chain: they act on the run named. A checkpoint of a continued run answers 409, and so do its pause, resume and cancel (with `continued_as`: control that run instead).",
    "The new run may exist already (say the engine opened its first wait on it); it keeps its own state (a paused new run stays paused; the old run's pause is not carried over). Events: `run.continued` on the old run (with `continued_as`, the moved and kept signals and the cancelled waits), `run.continued_from` on the new one. When the new run was itself continued since, the signals go to the newest run of its chain.",
    "Continuing to the same run again is 200 and changes nothing. 409 (problem `title` and the end of `type`): `already_continued` (to another run; `continued_as` names it), `continue_cycle` (the new run is the run itself, or its chain leads back to it), `target_has_predecessor` (another run was continued as it: a chain has one run before each), `run_cancelled`, `target_cancelled` (the new run, or the newest of its chain, is cancelled).",
  ].join("\n\n"),
  tags: ["Runs"],
  security: bearerSecurity,
  request: { params: RunParams, body: { content: { "application/json": { schema: ContinueBody, example: { run_id: "order-17-2", by: "engine", reason: "history too long" } } }, required: true } },
  responses: { 200: json(RunSchema, "The old run, now `continued` (or already continued as that run)"), ...commonProblems, 409: problems[409], 413: problems[413] },
});

const ChildBody = z.object({ run_id: RunIdSchema }).strict().openapi("RunChild");
const addChild = createRoute({
  method: "post",
  path: "/runs/{run}/children",
  operationId: "addRunChild",
  summary: "Register a child run: pause, resume and cancel reach it",
  tags: ["Runs"],
  security: bearerSecurity,
  request: { params: RunParams, body: { content: { "application/json": { schema: ChildBody, example: { run_id: "order-17-shipping" } } }, required: true } },
  responses: { 200: json(RunSchema, "The parent, with its children"), ...commonProblems, 409: problems[409], 413: problems[413] },
});
const removeChild = createRoute({
  method: "delete",
  path: "/runs/{run}/children",
  operationId: "removeRunChild",
  summary: "Unregister a child run",
  tags: ["Runs"],
  security: bearerSecurity,
  request: { params: RunParams, query: z.object({ run_id: RunIdSchema.openapi({ description: "The child to unregister" }) }) },
  responses: { 200: json(RunSchema, "The parent, with its children"), ...commonProblems, 404: problems[404] },
});

const checkpointRoute = createRoute({
  method: "post",
  path: "/runs/{run}/checkpoints/{name}",
  operationId: "passCheckpoint",
  summary: "A safe point: proceed now, or hold while the run is paused",
  description: "Answers `{proceed: true}` at once when the run is not paused; while paused holds until resumed or `wait_s` passes (`{proceed: false}`: ask again). 409 once the run is cancelled or continued (POST /runs/{run}/continue).",
  tags: ["Runs"],
  security: bearerSecurity,
  request: {
    params: z.object({
      run: RunIdSchema.openapi({ param: { name: "run", in: "path" } }),
      name: SignalNameSchema.openapi({ param: { name: "name", in: "path" }, example: "pre_routing" }),
    }),
    query: z.object({ wait_s: z.coerce.number().min(0).max(MAX_CHECKPOINT_WAIT_S).default(0).openapi({ description: `Hold up to this many seconds (max ${MAX_CHECKPOINT_WAIT_S})` }) }),
  },
  responses: { 200: json(z.object({ proceed: z.boolean() }).openapi("CheckpointAnswer"), "Whether the run may go on"), ...commonProblems, 409: problems[409], 413: problems[413] },
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
    200: {
      description: "A page of events; with `Accept: text/event-stream`, the history then live events (SSE, `id:` = event id, `Last-Event-ID` resumes)",
      content: {
        "application/json": { schema: z.object({ items: z.array(EventSchema), next_cursor: z.string().nullable().openapi({ description: "Pass as ?after= for the next page" }) }).openapi("RunEventList") },
        "text/event-stream": { schema: z.string().openapi({ description: "event: <type>, id: <event id>, data: <RunEvent as JSON>" }) },
      },
    },
    ...commonProblems,
  },
});

export function runsRouter(deps: Deps & { changes: ChangeFeed; shutdown: AbortSignal }) {
  return new OpenAPIHono({ defaultHook })
    .openapi(get, async (c) => c.json(await getRun(deps, c.req.valid("param").run), 200))
    // Without a JSON content type the optional body validates as {}.
    .openapi(pause, async (c) => c.json(await pauseRun(deps, { runId: c.req.valid("param").run, ...c.req.valid("json") }), 200))
    .openapi(resume, async (c) => c.json(await resumeRun(deps, { runId: c.req.valid("param").run, ...c.req.valid("json") }), 200))
    .openapi(cancel, async (c) => c.json(await cancelRun(deps, { runId: c.req.valid("param").run, ...c.req.valid("json") }), 200))
    .openapi(continueRoute, async (c) => {
      const { run_id: newRunId, ...rest } = c.req.valid("json");
      return c.json(await continueRun(deps, { runId: c.req.valid("param").run, newRunId, ...rest }), 200);
    })
    .openapi(addChild, async (c) => c.json(await registerChild(deps, c.req.valid("param").run, c.req.valid("json").run_id), 200))
    .openapi(removeChild, async (c) => c.json(await unregisterChild(deps, c.req.valid("param").run, c.req.valid("query").run_id), 200))
    .openapi(checkpointRoute, async (c) => {
      const { run, name } = c.req.valid("param");
      const signal = heldSignal(c.req.raw, deps.shutdown);
      return c.json(await checkpoint(deps, run, name, c.req.valid("query").wait_s, signal), 200);
    })
    .openapi(events, async (c) => {
      const q = c.req.valid("query");
      const run = c.req.valid("param").run;
      if (!c.req.header("accept")?.includes("text/event-stream")) return c.json(await getRunEvents(deps, run, q.after, q.limit), 200);
      // Empty is no last event (an EventSource that saw an `id:` line with no value sends it so):
      // the stream starts where ?after= says, or at the beginning.
      const lastEventId = c.req.header("last-event-id") || undefined;
      const afterId = lastEventId !== undefined ? parseEventId(lastEventId) : q.after === undefined ? 0 : parseEventId(q.after);
      if (afterId === undefined) {
        if (lastEventId !== undefined) throw new BadRequestError("the Last-Event-ID header must be an event id (ev_...)");
        throw new BadRequestError("after must be an event id (ev_...)", [{ path: "/after", message: "is not an event id" }]);
      }
      return runEventStream(deps, run, afterId, c.req.raw, (event) => ({ id: event.id, event: event.type, data: JSON.stringify(event) })) as never;
    });
}
