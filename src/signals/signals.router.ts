import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Readable } from "node:stream";
import type { Context } from "hono";
import { bearerToken } from "../auth/api-keys.ts";
import type { Deps } from "../deps.ts";
import { PayloadTooLargeError } from "../core/errors.ts";
import { readCapped, readStreamCapped } from "../core/read-capped.ts";
import type { Metrics } from "../core/metrics.ts";
import { bearerSecurity, commonProblems, CursorQuery, defaultHook, holdQuery, json, LimitQuery, listOf, problem, problems, RunIdSchema, SignalNameSchema } from "../http/openapi.ts";
import { ProblemSchema, problemResponse, type Problem } from "../http/problem.ts";
import { sendSignal } from "./send-signal.ts";
import { sendSignalBatch } from "./send-signal-batch.ts";
import { findSignals } from "./list-signals.ts";
import { OUTCOME_STATUS, OUTCOMES, RECORD_OUTCOMES, type IntakeAnswer } from "./signal-outcome.ts";
import { awaitReply, getSignal, MAX_REPLY_WAIT_S, replyKnown, replyState } from "./signal-reply.ts";
import type { ChangeFeed } from "../events/change-feed.ts";
import { redriveSignal } from "./redrive-signal.ts";
import { redriveMatching } from "./redrive-matching.ts";
import { RedriveBody, RedriveResultSchema, RedrivenSchema } from "./redrive.schemas.ts";
import { forOneWait, RESERVED_KEY } from "./redrive.queries.ts";
import { heldSignal } from "../http/held-request.ts";

type AcceptedAnswer = Extract<IntakeAnswer, { sequence: number }>;

/** Where a signal's reply stands: on intake with `wait_s`, and on GET /signals/{id}. */
const ReplyFields = {
  reply: z.unknown().openapi({
    description:
      "The reply of the resume callback of the wait the signal resolved: the JSON body of its first 2xx answer (`content-type: application/json`, at most 64 KiB). Null until it is known, and when that answer had no JSON body",
    example: { order_status: "approved" },
  }),
  reply_pending: z.boolean().openapi({
    description:
      "True while a reply may still come (the callback is owed, or a buffered signal awaits its wait). False once it is known, or when none will come: `delivery_status` is `none` (the wait has no callback_url) or `failed` (until `POST /waits/{id}/redeliver`), or the signal was never kept for a wait",
  }),
  delivery_status: z.enum(["none", "pending", "delivered", "failed"]).nullable().openapi({ description: "The resume callback's delivery status (as the wait's `delivery.status`); null while no wait has taken the signal, and while the wait that counted it is still open (a vote short of its quorum)" }),
};

const AcceptedSchema = z
  .object({
    outcome: z.enum(["received", "buffered", "started", "duplicate"]).openapi({
      description:
        "`started`: signal-with-start (the signal type declares `start`) and the run was never seen: the signal is kept for the run's first wait of that name, and a `run.start` event is POSTed to the type's start URL",
    }),
    signal_id: z.string().openapi({ example: "sg_01jb2m3k4n5p6q7r8s9t0v1w2x3y" }),
    sequence: z.number().int().openapi({ example: 1 }),
    wait_id: z.string().nullable(),
    run_id: z.string().openapi({ description: "The run the signal was applied to: the run in the URL, or, when that run was continued (POST /runs/{run}/continue), the newest run of its chain. A `duplicate` names the run of the first signal", example: "order-17" }),
    reply: ReplyFields.reply.optional().openapi({ description: `With \`wait_s\`: ${ReplyFields.reply.description}` }),
    reply_pending: ReplyFields.reply_pending.optional().openapi({ description: `With \`wait_s\`: ${ReplyFields.reply_pending.description}` }),
    delivery_status: ReplyFields.delivery_status.optional().openapi({ description: `With \`wait_s\`: ${ReplyFields.delivery_status.description}` }),
  })
  .openapi("SignalAccepted");

/**
 * A sender's key. `link:` and `console:` are the keys of answers made for one wait (an approval
 * link's, an operator's in the console): a sender holding one (a link's id is in the link) would
 * make that answer a conflict, or a duplicate of its own.
 */
const senderKey = (max: z.ZodString) =>
  max.refine((k) => !forOneWait(k), RESERVED_KEY);

/** Checked before the body is read, as wait_s: a key too long to index is a 400, not a failed insert. */
const IdempotencyKey = senderKey(z.string().max(200))
  .optional()
  .openapi({ description: "Same key and payload again is a duplicate. Keys starting with `link:` or `console:` are refused (400): approval links' and the console's answers carry them" });

/** `wait_s` on intake: a hold for the reply, so more than 0 (0 would change nothing but the answer's shape). */
const IntakeQuery = z.object({
  wait_s: z.coerce
    .number()
    .gt(0)
    .max(MAX_REPLY_WAIT_S)
    .optional()
    .openapi({
      description: `Hold the answer up to this many seconds (more than 0, at most ${MAX_REPLY_WAIT_S}; decimals allowed) until the resume callback of the wait the signal resolved is delivered, and answer its \`reply\``,
      example: 30,
    }),
});

const SignalRecordSchema = z
  .object({
    id: z.string(),
    run_id: z.string(),
    signal: z.string(),
    sequence: z.number().int().nullable(),
    outcome: z.enum(RECORD_OUTCOMES).openapi({
      description:
        "The intake outcome, or `expired`: a buffered signal whose `buffer_ttl_s` passed before any wait consumed it (it keeps its `sequence`; no wait will take it). A `started` signal stays `started` once a wait consumes it (`wait_id` is then set)",
    }),
    payload: z.unknown(),
    payload_bytes: z.number().int().nullable().openapi({
      description: "A rejected signal keeps its payload only up to 4,096 bytes: past that, `payload` is null and this is the size received",
    }),
    idempotency_key: z.string().nullable(),
    validation_errors: z.array(z.object({ path: z.string(), message: z.string() })).nullable(),
    wait_id: z.string().nullable(),
    received_at: z.string().datetime({ offset: true }),
    redriven_from: z.string().nullable().openapi({ description: "Set on a redrive (POST /signals/redrive): the dead letter this record sent again" }),
    redriven_as: z.string().nullable().openapi({ description: "Set on a dead letter that was redriven: the record of the new attempt (a signal is redriven at most once)" }),
  })
  .openapi("SignalRecord");

/** A refused signal: the shared Problem plus the intake outcome (and the signal's id once it is logged). */
const IntakeProblemSchema = z
  .object({
    // Flat rather than `ProblemSchema.extend` (an allOf): generators and linters see type and title directly.
    ...ProblemSchema.shape,
    outcome: z.enum(OUTCOMES).openapi({ example: "rejected_not_waiting" }),
    signal_id: z.string().optional().openapi({ description: "Set when the rejected signal was recorded in the signal log" }),
    run_id: z.string().optional().openapi({
      description:
        "Set with `signal_id`: the run whose signal log holds the rejection. For rejected_not_waiting, rejected_not_active and rejected_idempotency_conflict (decided under the run's lock) the newest run of the chain when the run in the URL was continued; for the rejections decided before (invalid_json, rejected_unknown_signal, rejected_invalid_payload) the run in the URL",
    }),
  })
  .catchall(z.unknown())
  .openapi("IntakeProblem", {
    description: "RFC 9457 problem details for a refused signal",
    example: {
      type: "https://signalbox.dev/problems/rejected-not-waiting",
      title: "rejected_not_waiting",
      status: 409,
      detail: "run order-17 has no open wait for manager-approval",
      outcome: "rejected_not_waiting",
    },
  });
const intakeProblem = (description: string) => problem(description, IntakeProblemSchema);

const SignalIdParams = z.object({ id: z.string().min(1).max(100).openapi({ param: { name: "id", in: "path" }, example: "sg_01jb2m3k4n5p6q7r8s9t0v1w2x3y" }) });

const SignalWithReplySchema = z.object({ ...SignalRecordSchema.shape, ...ReplyFields }).openapi("SignalWithReply");

const getOne = createRoute({
  method: "get",
  path: "/signals/{id}",
  operationId: "getSignal",
  summary: "Read a signal record with its reply; with wait_s, long-poll until the reply is known",
  description:
    "The record as `GET /signals` lists it, plus where its reply stands (`reply`, `reply_pending`, `delivery_status`). With `wait_s`, the request is held while `reply_pending` is true: it answers as soon as the resume callback of the wait the signal resolved is delivered (or fails, or a buffered signal expires), or when `wait_s` passes, with the record as it is.",
  tags: ["Signals"],
  security: bearerSecurity,
  request: {
    params: SignalIdParams,
    query: z.object({ wait_s: holdQuery(MAX_REPLY_WAIT_S, "the reply is pending") }),
  },
  responses: { 200: json(SignalWithReplySchema, "The signal and its reply"), ...commonProblems, 404: problems[404] },
});

/** The intake's Idempotency-Key header, checked by the handler (made once: a zod object is costly to build per request). */
const IntakeKeyHeader = z.object({ "idempotency-key": IdempotencyKey });

const IntakeParams = z.object({
  run: RunIdSchema.openapi({ param: { name: "run", in: "path" } }),
  signal: SignalNameSchema.openapi({ param: { name: "signal", in: "path" } }),
});

/** Documented only: the handler reads the raw bytes itself (signatures cover exact bytes). */
const intake = createRoute({
  method: "post",
  path: "/signals/{run}/{signal}",
  operationId: "sendSignal",
  summary: "Send a signal to a run (external senders; authenticated by the signal type's auth)",
  description: [
    "The body is the payload, verified over the exact bytes received (signature headers per the signal type's `auth`; a management token is also accepted) and checked against the signal type's schema. Every answer names its `outcome`: `received`, `buffered` or `started` (202; `started`: the type declares `start` and the run was never seen, so a `run.start` event goes to its start URL), `duplicate` (200, same idempotency key and payload), or a rejection as `application/problem+json`. Accepted signals get the run's next `sequence`, gapless from 1. A signal addressed to a continued run (POST /runs/{run}/continue) is applied to the newest run of its chain, under that run's lock; `run_id` in the answer names the run it was applied to (always present), and an idempotency key counts across the runs of the chain on the way.",
    "With `wait_s`, a `received` answer is held until the resume callback of the wait it resolved is delivered: then 200 with the callback's `reply` (its JSON answer, or null when it had none). A `buffered` or `started` one is held until a wait takes it and that wait's callback is delivered; a vote that does not yet decide a quorum wait, until the wait resolves and its callback is delivered (every vote gets that reply). If `wait_s` passes first, the answer is as without it (202) with `reply_pending: true` (read the reply later with `GET /signals/{id}`). When no reply will come, it answers at once with `reply_pending: false`: the wait has no `callback_url` (`delivery_status: none`), its delivery failed (`failed`), or the signal is buffered on a run that was cancelled or continued (no wait will take it). A `duplicate` is held as its original was and stays 200. Rejections answer at once. `POST /signals/batch` takes no `wait_s`.",
  ].join("\n\n"),
  tags: ["Signals"],
  security: [{}, { bearerAuth: [] }],
  request: {
    params: IntakeParams,
    query: IntakeQuery,
    headers: z.object({
      "idempotency-key": IdempotencyKey,
      "webhook-id": z.string().optional().openapi({ description: "standard-webhooks: message id (also the idempotency key; like `Idempotency-Key`, a signed one starting with `link:` or `console:` is refused, 400)" }),
      "webhook-timestamp": z.string().optional().openapi({ description: "standard-webhooks: unix seconds" }),
      "webhook-signature": z.string().optional().openapi({ description: "standard-webhooks: space-separated v1,<base64>" }),
      "x-hub-signature-256": z.string().optional().openapi({ description: "github: sha256=<hex>" }),
      "stripe-signature": z.string().optional().openapi({ description: "stripe: t=<ts>,v1=<hex>" }),
      "x-shopify-hmac-sha256": z.string().optional().openapi({ description: "shopify: base64 HMAC" }),
      "x-slack-signature": z.string().optional().openapi({ description: "slack: v0=<hex>" }),
      "x-slack-request-timestamp": z.string().optional().openapi({ description: "slack: unix seconds" }),
    }),
    body: { content: { "application/json": { schema: z.unknown().openapi({ description: "The payload: any JSON, checked against the signal type's schema" }), example: { approved: true, response: "approve" } } }, required: true },
  },
  responses: {
    202: json(AcceptedSchema, "received (the open wait is resolved), buffered, or started (a run.start event is sent); with `wait_s`, no reply yet (`reply_pending: true`) or none to come (`reply_pending: false`)"),
    200: json(AcceptedSchema, "duplicate: the same idempotency key and payload as an earlier signal; or, with `wait_s`, the resume callback was delivered: its `reply`"),
    400: problem("invalid_json (with `outcome`), or a malformed run id, signal name, `wait_s`, `Idempotency-Key` or `webhook-id` (with `validation_errors`)"),
    401: intakeProblem("rejected_unauthenticated"),
    404: intakeProblem("rejected_unknown_signal"),
    409: intakeProblem("rejected_not_waiting, rejected_not_active or rejected_idempotency_conflict"),
    413: intakeProblem("payload_too_large"),
    422: intakeProblem("rejected_invalid_payload (validation_errors says where)"),
    429: problems[429],
    500: problems[500],
    503: problems[503],
  },
});

const BatchBody = z
  .object({
    signals: z
      .array(
        z
          .object({
            run_id: RunIdSchema,
            signal: SignalNameSchema,
            payload: z.unknown(),
            idempotency_key: senderKey(z.string().min(1).max(200)).optional(),
          })
          .strict(),
      )
      .min(1)
      .max(500),
  })
  .strict()
  .openapi("SignalBatch");

const BatchResultSchema = z
  .object({
    outcome: z.enum(OUTCOMES),
    status: z.number().int(),
    signal_id: z.string().optional(),
    sequence: z.number().int().optional(),
    wait_id: z.string().nullable().optional(),
    run_id: z.string().optional().openapi({ description: "The run the signal was applied to: the run in the URL, or, when that run was continued (POST /runs/{run}/continue), the newest run of its chain. A `duplicate` names the run of the first signal; on rejections, as in `IntakeProblem`" }),
    detail: z.string().optional(),
    validation_errors: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  })
  .openapi("SignalBatchResult");

const batch = createRoute({
  method: "post",
  path: "/signals/batch",
  operationId: "sendSignalBatch",
  summary: "Send several signals (management token); one intake answer per item, in order",
  description: "Takes no `wait_s`: send one signal with `POST /signals/{run}/{signal}?wait_s=` to wait for its reply.",
  tags: ["Signals"],
  security: bearerSecurity,
  request: {
    body: {
      content: { "application/json": { schema: BatchBody, example: { signals: [{ run_id: "order-18", signal: "manager-approval", payload: { approved: true, response: "approve" }, idempotency_key: "order-18/approval" }] } } },
      required: true,
    },
  },
  responses: { 200: json(z.object({ results: z.array(BatchResultSchema) }).openapi("SignalBatchResults"), "One answer per item"), ...commonProblems, 413: problems[413] },
});

const listForRun = createRoute({
  method: "get",
  path: "/runs/{run}/signals",
  operationId: "listRunSignals",
  summary: "A run's signal log (accepted and rejected), oldest first",
  tags: ["Signals"],
  security: bearerSecurity,
  request: { params: z.object({ run: RunIdSchema.openapi({ param: { name: "run", in: "path" } }) }), query: z.object({ limit: LimitQuery, cursor: CursorQuery }) },
  responses: { 200: json(listOf(SignalRecordSchema, "SignalList"), "A page of signals"), ...commonProblems },
});

const list = createRoute({
  method: "get",
  path: "/signals",
  operationId: "listSignals",
  summary: "The signal log across runs, e.g. the dead letters (?outcome=rejected_not_waiting), oldest first",
  tags: ["Signals"],
  security: bearerSecurity,
  request: { query: z.object({ outcome: z.enum(RECORD_OUTCOMES).optional(), limit: LimitQuery, cursor: CursorQuery }) },
  responses: { 200: json(listOf(SignalRecordSchema, "SignalList"), "A page of signals"), ...commonProblems },
});

const redrive = createRoute({
  method: "post",
  path: "/signals/redrive",
  operationId: "redriveSignals",
  summary: "Send dead letters again: one signal (its intake answer) or every match of a filter (counts)",
  description: [
    "With `signal_id`, sends that signal's stored payload again to the same run and signal name, through intake like any signal, and answers with the intake outcome of the new attempt: its usual status and body, plus `redriven_from`. The new record in the signal log carries `redriven_from`, and the dead letter shows `redriven_as`.",
    "A signal can be redriven when it is `rejected_not_waiting`, `expired` (buffered, its `buffer_ttl_s` passed before a wait took it) or `rejected_invalid_payload`; others are 409 `not_redrivable`, and so is an answer made for one wait (an approval link's, an operator's in the console: its `idempotency_key` starts with `link:` or `console:`), which would otherwise answer the run's next wait of that name; a filter leaves those out. A signal is redriven at most once: again (or a concurrent second request) is 409 `already_redriven`, naming the record in `redriven_as`. A new attempt that is rejected again is itself a dead letter that may be redriven.",
    "A rejected signal keeps its payload only up to 4,096 bytes (larger ones keep their size, `payload_bytes`, and digest): such a signal cannot be redriven, 422 `payload_not_kept`.",
    "Signatures are not checked again (the signal was authenticated when it first came, and this call needs a management token); the payload is checked against the signal type's current schema, so a payload rejected by an older schema can pass now. The sender's idempotency key goes with the payload: when a signal with that key was accepted since, the answer is that signal's `duplicate` (200) and nothing is sent twice (nothing new is recorded, so such a redrive answers the same again). An expired signal keeps its key, and its copy is sent without one.",
    "With `filter`, redrives every dead letter that matches (all of `outcome`, `signal`, `run`, and received before `before`; `outcome` unset takes `rejected_not_waiting` and `expired`), oldest first, one after the other, at most 10,000 per request (`more` is then true: send the same request again). Only signals received before the request began are taken, so a request never redrives its own new dead letters. It answers counts: `outcomes` of the new attempts, and matches `skipped`.",
  ].join("\n\n"),
  tags: ["Signals"],
  security: bearerSecurity,
  request: {
    body: {
      content: { "application/json": { schema: RedriveBody, example: { filter: { outcome: "rejected_not_waiting", signal: "manager-approval", before: "2026-11-24T10:00:00Z" } } } },
      required: true,
    },
  },
  responses: {
    200: json(z.union([RedrivenSchema, RedriveResultSchema]), "With `filter`: the counts (`RedriveResult`). With `signal_id`: a `duplicate` answer (`SignalRedriven`)"),
    202: json(RedrivenSchema, "With `signal_id`: the new attempt was received, buffered or started"),
    400: problems[400],
    401: problems[401],
    404: problem("No signal with that id (a `Problem`), or the new attempt was `rejected_unknown_signal`: its signal type is gone (an `IntakeProblem`)", z.union([ProblemSchema, IntakeProblemSchema])),
    409: problem(
      "`already_redriven` (with `redriven_as`) or `not_redrivable` (a `Problem`); or the new attempt was rejected_not_waiting, rejected_not_active or rejected_idempotency_conflict (an `IntakeProblem` with `signal_id` and `redriven_from`)",
      z.union([ProblemSchema, IntakeProblemSchema]),
    ),
    413: problems[413],
    422: problem("`payload_not_kept` (a `Problem`), or the new attempt was rejected_invalid_payload (an `IntakeProblem` with `validation_errors`)", z.union([ProblemSchema, IntakeProblemSchema])),
    500: problems[500],
    503: problems[503],
  },
});

export interface SignalsRouterDeps extends Deps {
  metrics: Metrics;
  isManagementToken(token: string | undefined): Promise<boolean>;
  changes: ChangeFeed;
  /** Aborted on SIGTERM: requests held for a reply answer at once. */
  shutdown: AbortSignal;
  /** When the database stops answering, a signal held for its reply is answered without it. */
  availability?: { whenDown(fn: () => void): () => void };
}

/** `POST`-only paths under /signals: a GET there is 405, not a lookup of a signal with that id. */
const POST_ONLY = ["/signals/batch", "/signals/redrive"];

export function signalsRouter(deps: SignalsRouterDeps) {
  const app = new OpenAPIHono({ defaultHook });
  for (const path of POST_ONLY) app.get(path, (c) => methodNotAllowed(c, "POST"));
  app
    .openapi(getOne, async (c) => {
      const held = heldSignal(c.req.raw, deps.shutdown);
      return c.json((await getSignal(deps, c.req.valid("param").id, c.req.valid("query").wait_s ?? 0, held)) as never, 200);
    })
    .openapi(batch, async (c) => {
      const items = c.req.valid("json").signals;
      // The text the items were validated from (hono keeps it): payloads are taken from it digit for digit.
      const results = await sendSignalBatch(deps, items, await c.req.text());
      results.forEach((r, i) => deps.metrics.signals.inc(signalLabels(items[i]!.signal, r.outcome)));
      return c.json({ results }, 200);
    })
    .openapi(listForRun, async (c) => c.json(await findSignals(deps, { runId: c.req.valid("param").run, ...c.req.valid("query") }), 200))
    .openapi(list, async (c) => c.json(await findSignals(deps, c.req.valid("query")), 200))
    .openapi(redrive, async (c) => {
      const body = c.req.valid("json");
      if (body.signal_id !== undefined) {
        const answer = await redriveSignal(deps, body.signal_id);
        return intakeResponse(c, answer) as never;
      }
      const { outcome, signal, run, before } = body.filter!;
      const summary = await redriveMatching(deps, {
        ...(outcome !== undefined ? { outcome } : {}),
        ...(signal !== undefined ? { signal } : {}),
        ...(run !== undefined ? { runId: run } : {}),
        ...(before !== undefined ? { before } : {}),
      });
      return c.json(summary, 200);
    });
  app.openAPIRegistry.registerPath(intake);
  app.post("/signals/:run/:signal", async (c) => {
    const params = IntakeParams.safeParse(c.req.param());
    if (!params.success) return defaultHook({ success: false, error: params.error, target: "param" } as never, c as never) as Response;
    // Checked before the body is read: a bad wait_s changes nothing.
    const query = IntakeQuery.safeParse({ wait_s: c.req.query("wait_s") });
    if (!query.success) return defaultHook({ success: false, error: query.error, target: "query" } as never, c as never) as Response;
    const key = IntakeKeyHeader.safeParse({ "idempotency-key": c.req.header("idempotency-key") || undefined });
    if (!key.success) return defaultHook({ success: false, error: key.error, target: "header" } as never, c as never) as Response;
    const body = await readBody(c, deps.config.SIGNALBOX_MAX_BODY_BYTES);
    const management = await deps.isManagementToken(bearerToken(c.req.header("authorization")));
    const answer = await sendSignal(deps, {
      runId: params.data.run,
      signal: params.data.signal,
      body,
      idempotencyKey: key.data["idempotency-key"],
      credentials: { management, headers: headerValues(c), nowSeconds: Math.floor(Date.now() / 1000) },
    });
    // Unauthenticated attempts are not in the signal log (anyone can make them): only counted.
    if (answer.outcome === "rejected_unauthenticated") deps.metrics.unauthenticated.inc();
    else deps.metrics.signals.inc(signalLabels(params.data.signal, answer.outcome));
    const waitS = query.data.wait_s;
    if (waitS === undefined || !("sequence" in answer)) return intakeResponse(c, answer);
    return heldForReply(c, deps, answer, waitS);
  });
  return app;
}

/**
 * An accepted signal's answer held for its reply (`wait_s`): the reply when the callback is
 * delivered (200), else as without wait_s (202) with `reply_pending`. Past the cap on held
 * requests it answers at once: the signal is accepted, and a 503 would have it sent again.
 */
async function heldForReply(c: Context, deps: SignalsRouterDeps, answer: AcceptedAnswer, waitS: number): Promise<Response> {
  const held = heldSignal(c.req.raw, deps.shutdown);
  // The signal is accepted (committed): if its reply cannot be read (the database went away or
  // stopped answering while it was held), it is answered as without wait_s, its reply read later
  // with GET /signals/{id}. A 503 would have it sent again.
  const withoutReply = () => c.json({ ...answer, reply_pending: true }, answer.outcome === "duplicate" ? 200 : 202);
  let stopWatching: (() => void) | undefined;
  const databaseGone = new Promise<undefined>((resolve) => {
    stopWatching = deps.availability?.whenDown(() => resolve(undefined));
  });
  let s: Awaited<ReturnType<typeof awaitReply>> | undefined;
  try {
    s = await Promise.race([awaitReply(deps, answer.signal_id, waitS, held, true), databaseGone]);
  } catch (err) {
    deps.log.warn({ err, signalId: answer.signal_id }, "reading a held signal's reply failed; answered without it");
    return withoutReply();
  } finally {
    stopWatching?.();
  }
  if (s === undefined) return withoutReply();
  const state = replyState(s);
  const status = answer.outcome === "duplicate" || replyKnown(s) ? 200 : 202;
  return c.json({ ...answer, wait_id: s.waitId ?? answer.wait_id, ...state }, status);
}

function methodNotAllowed(c: Context, allow: string): Response {
  return problemResponse(
    c,
    { type: "https://signalbox.dev/problems/method-not-allowed", title: "Method Not Allowed", status: 405, detail: `${c.req.path} takes ${allow} only` },
    { allow },
  );
}

export function intakeResponse(c: Context, answer: IntakeAnswer): Response {
  const status = OUTCOME_STATUS[answer.outcome];
  if ("sequence" in answer) return c.json(answer, status as 200 | 202);
  const { outcome, detail, ...rest } = answer;
  const problem: Problem = { type: `https://signalbox.dev/problems/${outcome.replace(/_/g, "-")}`, title: outcome, status, detail, outcome, ...rest };
  return problemResponse(c, problem, status === 401 ? { "www-authenticate": 'Bearer realm="signalbox"' } : {});
}

/** Every value of a header, so a duplicated signature header can be refused rather than merged. */
function headerValues(c: Context) {
  const raw = (c.env as { incoming?: { headersDistinct?: Record<string, string[] | undefined> } } | undefined)?.incoming?.headersDistinct;
  return (name: string): string[] => {
    if (raw) return raw[name.toLowerCase()] ?? [];
    const v = c.req.header(name);
    return v === undefined ? [] : [v];
  };
}

/** Reads the raw body once, refusing it as soon as it passes the cap (chunked bodies included). */
async function readBody(c: Context, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > maxBytes) throw tooLarge(maxBytes);
  // Node's request itself when served by Node (never read before this), else the web Request's body.
  const incoming = (c.env as { incoming?: Readable } | undefined)?.incoming;
  const body = incoming && !incoming.readableEnded ? await readStreamCapped(incoming, maxBytes) : await readCapped(c.req.raw.body, maxBytes);
  if (body === null) throw tooLarge(maxBytes);
  return body;
}

const tooLarge = (maxBytes: number) => new PayloadTooLargeError(`the body is larger than ${maxBytes} bytes`, { outcome: "payload_too_large" });

/** Names of unknown signal types come from the caller: never a label value (unbounded series). */
const signalLabels = (signal: string, outcome: string) => ({ signal: outcome === "rejected_unknown_signal" ? "(unknown)" : signal, outcome });
