import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Deps } from "../deps.ts";
import { bearerSecurity, commonProblems, CursorQuery, defaultHook, json, LimitQuery, listOf, problems, SignalNameSchema } from "../http/openapi.ts";
import { declareSignalType, getSignalType, removeSignalType } from "./declare-signal-type.ts";
import { listSignalTypesPage } from "./list-signal-types.ts";
import { SignalTypeBodySchema } from "./signal-type-body.ts";

const AuthViewSchema = z
  .object({
    scheme: z.string(),
    secret_count: z.number().int().openapi({ description: "How many secrets are active; secrets are write-only" }),
    tolerance_s: z.number().int(),
    header: z.string().optional(),
    run_pointer: z.string().optional(),
    replay_across_runs: z.literal(true).optional(),
  })
  .openapi("SignalTypeAuthView");

export const SignalTypeSchema = z
  .object({
    name: z.string(),
    description: z.string().nullable(),
    schema: z.unknown().openapi({ description: "JSON Schema (2020-12) or null" }),
    auth: AuthViewSchema,
    buffer_ttl_s: z.number().int(),
    responses: z.array(z.string()).nullable(),
    notify_url: z.string().nullable(),
    reminders_s: z.array(z.number().int()),
    start: z
      .object({ url: z.string() })
      .nullable()
      .openapi({ description: "Signal-with-start: where a `run.start` event goes when a signal of this type finds a run never seen; null: no start" }),
    created_at: z.string().datetime(),
    updated_at: z.string().datetime(),
  })
  .openapi("SignalType");

const NameParams = z.object({ name: SignalNameSchema.openapi({ param: { name: "name", in: "path" } }) });

/** The documented request: valid as it stands (the secret is the Standard Webhooks specification's example). */
const SIGNAL_TYPE_EXAMPLE = {
  description: "Manager approves the order",
  schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" } } },
  auth: { scheme: "standard-webhooks", secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], tolerance_s: 300 },
  buffer_ttl_s: 0,
  responses: ["approve", "reject"],
};

const put = createRoute({
  method: "put",
  path: "/signal-types/{name}",
  operationId: "putSignalType",
  summary: "Create or replace a signal type",
  description:
    "The declared contract of a signal: the JSON Schema (draft 2020-12) every payload must satisfy, how senders authenticate (`auth.scheme`), how long a signal that finds no open wait is kept (`buffer_ttl_s`), and for human decisions the allowed `responses`. Secrets are write-only: responses show `secret_count`. An invalid JSON Schema is 422, and so is a Standard Webhooks secret that is not `whsec_` + base64, or a body-only scheme (github, shopify, hmac-sha256) with neither `run_pointer` nor `replay_across_runs: true`.",
  tags: ["Signal types"],
  security: bearerSecurity,
  request: { params: NameParams, body: { content: { "application/json": { schema: SignalTypeBodySchema, example: SIGNAL_TYPE_EXAMPLE } }, required: true } },
  responses: {
    200: json(SignalTypeSchema, "Replaced"),
    201: json(SignalTypeSchema, "Created"),
    ...commonProblems,
    413: problems[413],
    422: problems[422],
  },
});

const get = createRoute({
  method: "get",
  path: "/signal-types/{name}",
  operationId: "getSignalType",
  summary: "Read a signal type",
  tags: ["Signal types"],
  security: bearerSecurity,
  request: { params: NameParams },
  responses: { 200: json(SignalTypeSchema, "The signal type"), ...commonProblems, 404: problems[404] },
});

const list = createRoute({
  method: "get",
  path: "/signal-types",
  operationId: "listSignalTypes",
  summary: "List signal types by name",
  tags: ["Signal types"],
  security: bearerSecurity,
  request: { query: z.object({ limit: LimitQuery, cursor: CursorQuery }) },
  responses: { 200: json(listOf(SignalTypeSchema, "SignalTypeList"), "A page of signal types"), ...commonProblems },
});

const remove = createRoute({
  method: "delete",
  path: "/signal-types/{name}",
  operationId: "deleteSignalType",
  summary: "Delete a signal type",
  tags: ["Signal types"],
  security: bearerSecurity,
  request: { params: NameParams },
  responses: { 204: { description: "Deleted" }, ...commonProblems, 404: problems[404] },
});

export function signalTypesRouter(deps: Deps) {
  return new OpenAPIHono({ defaultHook })
    .openapi(put, async (c) => {
      const { signalType, created } = await declareSignalType(deps, c.req.valid("param").name, c.req.valid("json"));
      return c.json(signalType, created ? 201 : 200);
    })
    .openapi(get, async (c) => c.json(await getSignalType(deps, c.req.valid("param").name), 200))
    .openapi(list, async (c) => c.json(await listSignalTypesPage(deps, c.req.valid("query")), 200))
    .openapi(remove, async (c) => {
      await removeSignalType(deps, c.req.valid("param").name);
      return c.body(null, 204);
    });
}
