import { createRoute, OpenAPIHono, z } from "@hono/zod-openapi";
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { Deps } from "../deps.ts";
import { ServiceError } from "../core/errors.ts";
import type { Metrics } from "../core/metrics.ts";
import { bearerSecurity, commonProblems, defaultHook, json, noSecurity, problems, WaitIdSchema } from "../http/openapi.ts";
import { ProblemSchema, problemFromError, problemResponse } from "../http/problem.ts";
import { createLinks } from "./create-links.ts";
import { linkOrigin } from "./link-origin.ts";
import { confirmPage, errorPage, PAGE_HEADERS, resultPage } from "./pages.ts";
import { checkLinkToken, formTooLarge, inspectLink, LinkError, MAX_COMMENT_CHARS, MAX_FORM_BYTES, respondToLink } from "./respond-to-link.ts";
import { readCapped } from "../core/read-capped.ts";

/** Where approval links live; app.ts lets them through without a management token (the link is the credential). */
export const APPROVAL_LINK_PREFIX = "/approvals/";

const CreateLinksBody = z
  .object({
    ttl_s: z.number().int().min(1).max(365 * 86400).default(86400).openapi({ description: "Seconds the links stay valid (never past the wait's deadline)", example: 86400 }),
    responder: z.string().min(1).max(200).openapi({ description: "Who answers: sent as `responder` (one vote per responder on a quorum wait)", example: "kim@example.com" }),
  })
  .strict()
  .openapi("CreateApprovalLinks");

const ApprovalLinksSchema = z
  .object({
    links: z.record(z.string(), z.string().url()).openapi({
      description: "One absolute link per allowed response of the signal type",
      example: { approve: "https://signalbox.example.com/approvals/eyJhbGciOiJIUzI1NiJ9.e30.sig", reject: "https://signalbox.example.com/approvals/eyJhbGciOiJIUzI1NiJ9.e31.sig" },
    }),
    expires_at: z.string().datetime({ offset: true }).openapi({ description: "When the links stop working: ttl_s from now or the wait's deadline, whichever is first" }),
  })
  .openapi("ApprovalLinks");

const create = createRoute({
  method: "post",
  path: "/waits/{id}/links",
  operationId: "createApprovalLinks",
  summary: "Make signed one-time links a person answers the wait with",
  description:
    "One link per allowed `responses` value of the wait's signal type (409 for a type without responses, or a wait that is not waiting). Links are absolute, on `SIGNALBOX_PUBLIC_URL` or else the origin of this request if its host is allowed (`SIGNALBOX_LINK_HOSTS`, by default loopback names only; 400 otherwise), and need no token: `GET` shows a confirmation page, `POST` sends `{response, responder, comment}` as the wait's signal. The links of one call work once between them, only for this wait, until `expires_at`.",
  tags: ["Approvals"],
  security: bearerSecurity,
  request: {
    params: z.object({ id: WaitIdSchema.openapi({ param: { name: "id", in: "path" } }) }),
    body: { content: { "application/json": { schema: CreateLinksBody, example: { ttl_s: 86400, responder: "kim@example.com" } } }, required: true },
  },
  responses: { 200: json(ApprovalLinksSchema, "The links"), ...commonProblems, 404: problems[404], 409: problems[409], 413: problems[413] },
});

const TokenParams = z.object({
  token: z
    .string()
    .min(1)
    .max(4096)
    .openapi({ param: { name: "token", in: "path" }, description: "The signed link token (as made by createApprovalLinks)", example: "eyJhbGciOiJIUzI1NiJ9.e30.sig" }),
});
const html = (description: string) => ({ description, content: { "text/html": { schema: z.string() } } });
/** A link failure is an HTML page, or problem+json for a client that asks for JSON and not HTML. */
const linkFailure = (description: string) => ({
  description,
  content: { "text/html": { schema: z.string() }, "application/problem+json": { schema: ProblemSchema } },
});
const linkFailures = {
  400: linkFailure("The link is malformed, altered or signed by no known key (or, on POST, the comment is unusable)"),
  404: linkFailure("The wait the link was made for does not exist"),
  409: linkFailure("The link was used already, or its wait is no longer waiting (settled, or replaced by a later wait)"),
  410: linkFailure("The link has expired"),
  429: problems[429],
  500: problems[500],
  503: problems[503],
};

const showPage = createRoute({
  method: "get",
  path: "/approvals/{token}",
  operationId: "showApprovalPage",
  summary: "An approval link: a confirmation page (does nothing by itself)",
  description: "Public: the link is the credential. A GET never answers (mail scanners fetch links); the page's form POSTs to the same URL.",
  tags: ["Approvals"],
  security: noSecurity,
  request: { params: TokenParams },
  responses: { 200: html("The confirmation page: the response, who answers, an optional comment, a button"), ...linkFailures },
});

const answer = createRoute({
  method: "post",
  path: "/approvals/{token}",
  operationId: "answerApprovalLink",
  summary: "Answer with an approval link: sends the wait's signal, once",
  description: `Public: the link is the credential. Sends \`{response, responder, comment}\` (comment omitted when blank, at most ${MAX_COMMENT_CHARS} characters) as the wait's signal and answers with a result page.`,
  tags: ["Approvals"],
  security: noSecurity,
  request: {
    params: TokenParams,
    body: {
      content: { "application/x-www-form-urlencoded": { schema: z.object({ comment: z.string().max(MAX_COMMENT_CHARS).optional() }).openapi("ApprovalAnswer") } },
      required: false,
    },
  },
  responses: { 200: html("The answer was recorded"), ...linkFailures, 413: linkFailure(`The form is larger than ${MAX_FORM_BYTES} bytes (it was not read)`), 422: linkFailure("The signal type refused the answer (its schema or responses changed)") },
});

export function approvalsRouter(deps: Deps & { metrics: Metrics }) {
  const app = new OpenAPIHono({ defaultHook }).openapi(create, async (c) => {
    const body = c.req.valid("json");
    const baseUrl = linkOrigin(deps.config, c.req.url);
    const made = await createLinks(deps, { waitId: c.req.valid("param").id, ttlS: body.ttl_s, responder: body.responder, baseUrl });
    return c.json({ links: made.links, expires_at: made.expiresAt.toISOString() }, 200);
  });

  // HTML routes: plain hono handlers (an HTML page is not a JSON contract), documented above.
  app.openAPIRegistry.registerPath(showPage);
  app.openAPIRegistry.registerPath(answer);
  app.get(`${APPROVAL_LINK_PREFIX}:token`, async (c) => {
    try {
      const { claims, wait } = await inspectLink(deps, c.req.param("token"));
      const page = confirmPage({ response: claims.response, responder: claims.responder, signal: wait.signal, runId: wait.runId, expiresAt: claims.expiresAt, maxCommentChars: MAX_COMMENT_CHARS });
      return c.body(page, 200, PAGE_HEADERS);
    } catch (err) {
      return failure(c, err);
    }
  });
  app.post(`${APPROVAL_LINK_PREFIX}:token`, async (c) => {
    try {
      // The token first: a forged link costs one signature check, never the parse of its body,
      // and its connection is closed with the answer: kept alive, the server would read and
      // discard the rest of the body first.
      await checkLinkToken(deps, c.req.param("token")).catch((err: unknown) => {
        c.header("connection", "close");
        throw err;
      });
      const comment = await readComment(c);
      const done = await respondToLink(deps, c.req.param("token"), comment);
      deps.metrics.signals.inc({ signal: done.wait.signal, outcome: "received" });
      const page = resultPage({ response: done.claims.response, responder: done.claims.responder, signal: done.wait.signal, comment: done.comment, moreVotesNeeded: done.waitStatus === "waiting" });
      return c.body(page, 200, PAGE_HEADERS);
    } catch (err) {
      return failure(c, err);
    }
  });
  return app;
}

/**
 * The form's comment (urlencoded or multipart); anything else in the body is ignored. At most
 * MAX_FORM_BYTES are read: past that the answer is refused (413) without reading the rest.
 */
async function readComment(c: Context): Promise<string | undefined> {
  const type = c.req.header("content-type") ?? "";
  if (!/^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(type)) return undefined;
  const bytes = await readCapped(c.req.raw.body, MAX_FORM_BYTES);
  if (!bytes) {
    c.header("connection", "close"); // the rest is not read: not even to keep the connection
    throw formTooLarge();
  }
  const form = await new Response(bytes, { headers: { "content-type": type } }).formData().catch(() => {
    throw new LinkError("bad_comment", 400, "The form cannot be read", "Send the comment as a form field. The link was not used.");
  });
  const comment = form.get("comment");
  if (comment === null || typeof comment === "string") return comment ?? undefined;
  throw new LinkError("bad_comment", 400, "The comment is not text", "Send the comment as a text field. The link was not used.");
}

/** A known failure as a page (or problem+json when asked for); anything else goes to app.onError. */
function failure(c: Context, err: unknown): Response {
  if (!(err instanceof ServiceError)) throw err;
  if (prefersProblemJson(c.req.header("accept"))) return problemResponse(c, problemFromError(err));
  const title = err instanceof LinkError ? err.title : "This link cannot be used";
  return c.body(errorPage(title, err.message), err.status as ContentfulStatusCode, PAGE_HEADERS);
}

const prefersProblemJson = (accept: string | undefined) => /application\/(problem\+)?json/i.test(accept ?? "") && !/text\/html/i.test(accept ?? "");
