import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { z } from "@hono/zod-openapi";
import { RequestError } from "@hono/node-server";
import { ServiceError, type ValidationIssue } from "../core/errors.ts";

export const PROBLEM_CONTENT_TYPE = "application/problem+json";

export const ValidationIssueSchema = z
  .object({
    path: z.string().openapi({ description: "JSON Pointer into the offending document; \"\" is the root", example: "/approved" }),
    message: z.string().openapi({ example: "must be boolean" }),
  })
  .openapi("ValidationIssue");

export const ProblemSchema = z
  .object({
    type: z.string().openapi({ example: "https://signalbox.dev/problems/bad-request" }),
    title: z.string().openapi({ example: "Bad Request" }),
    status: z.number().int().openapi({ example: 400 }),
    detail: z.string().openapi({ example: "timeout_s: must be greater than or equal to 0" }),
    instance: z.string().optional(),
    request_id: z.string().optional(),
    validation_errors: z.array(ValidationIssueSchema).max(20).optional(),
  })
  .catchall(z.unknown())
  .openapi("Problem", { description: "RFC 9457 problem details" });

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  validation_errors?: ValidationIssue[];
  [extra: string]: unknown;
}

export function problemFromError(err: ServiceError): Problem {
  return { type: err.type, title: err.title, status: err.status, detail: err.message, ...err.extra };
}

export function problemResponse(c: Context, problem: Problem, headers: Record<string, string> = {}): Response {
  const requestId = c.get("requestId" as never) as string | undefined;
  const body = JSON.stringify({ ...problem, ...(requestId ? { request_id: requestId } : {}) });
  return c.body(body, problem.status as ContentfulStatusCode, { "content-type": PROBLEM_CONTENT_TYPE, ...headers });
}

export function badRequest(detail: string, issues: ValidationIssue[]): Problem {
  return problemFromError(new ServiceError(400, "Bad Request", detail, { validation_errors: issues.slice(0, 20) }));
}

/**
 * The answer to a request @hono/node-server could not make a Request of (a Host header or a
 * target that makes no URL), which it answered with a bare 400: the app never saw it. Any other
 * error that reaches the server (none should: the app answers its own) is a 500, as a problem too.
 */
export function unreadableRequest(err: unknown): Response {
  const problem: Problem =
    err instanceof RequestError
      ? problemFromError(new ServiceError(400, "Bad Request", "the request's Host header or target does not make a URL"))
      : { type: "https://signalbox.dev/problems/internal", title: "Internal Server Error", status: 500, detail: "unexpected error" };
  return new Response(JSON.stringify(problem), { status: problem.status, headers: { "content-type": PROBLEM_CONTENT_TYPE } });
}
