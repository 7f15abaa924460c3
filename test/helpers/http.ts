import { request as httpRequest } from "node:http";
import { expect } from "vitest";
import type { TestApp } from "./test-app.ts";

export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  outcome?: string;
  validation_errors?: Array<{ path: string; message: string }>;
  [extra: string]: unknown;
}

/** Asserts an RFC 9457 problem with the given status and returns its body. */
export async function expectProblem(res: Response, status: number): Promise<ProblemBody> {
  const text = await res.text();
  expect(res.status, `expected ${status}, got ${res.status}: ${text}`).toBe(status);
  expect(res.headers.get("content-type") ?? "").toMatch(/^application\/problem\+json/);
  const body = JSON.parse(text) as ProblemBody;
  expect(body).toMatchObject({ status, type: expect.any(String), title: expect.any(String), detail: expect.any(String) });
  return body;
}

/** Reads every page of a list, following next_cursor. */
export async function readAll<T>(app: TestApp, path: string, limit: number): Promise<{ items: T[]; pages: number }> {
  const items: T[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const sep = path.includes("?") ? "&" : "?";
    const res = await app.api(`${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { items: T[]; next_cursor: string | null };
    expect(body.items.length).toBeLessThanOrEqual(limit);
    items.push(...body.items);
    cursor = body.next_cursor;
    pages++;
    if (pages > 1000) throw new Error("pagination does not end");
  } while (cursor);
  return { items, pages };
}

/**
 * Sends a request with the path exactly as written (fetch normalises `..` and some escapes
 * away, a hostile client does not).
 */
export function rawRequest(
  baseUrl: string,
  opts: { method: string; path: string; headers?: Record<string, string>; body?: string | Buffer },
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: url.hostname, port: url.port, method: opts.method, path: opts.path, headers: opts.headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}

/** A JSON POST/PUT with the management key. */
export const send = (app: TestApp, method: string, path: string, json?: unknown, headers: Record<string, string> = {}) =>
  app.api(path, { method, json, headers });

/** Declares a signal type (asserting it worked). */
export async function declareType(app: TestApp, name: string, body: Record<string, unknown> = { auth: { scheme: "none" } }) {
  const res = await app.api(`/signal-types/${name}`, { method: "PUT", json: body });
  expect([200, 201], await res.clone().text()).toContain(res.status);
  return res.json();
}

/** Anything that answers the management API: a test app, or a service process. */
export interface ApiClient {
  api(path: string, init: { method: string; json: unknown }): Promise<Response>;
}

/**
 * The one way a test opens a wait: POST /runs/{run}/waits with `spec`, returning status and
 * body. With `expectStatus` it also asserts the status (the body is in the failure message).
 */
export async function openWait(app: ApiClient, run: string, spec: Record<string, unknown>, expectStatus?: number) {
  const res = await app.api(`/runs/${encodeURIComponent(run)}/waits`, { method: "POST", json: spec });
  const text = await res.text();
  if (expectStatus !== undefined) expect(res.status, `POST /runs/${run}/waits: ${text}`).toBe(expectStatus);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return { status: res.status, body: JSON.parse(text) as any };
}

/** Sends a signal through intake (no credentials unless given). */
export async function intake(app: TestApp, run: string, signal: string, body: string | Uint8Array, headers: Record<string, string> = {}) {
  const res = await fetch(`${app.baseUrl}/signals/${encodeURIComponent(run)}/${signal}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  const text = await res.text();
  return { status: res.status, contentType: res.headers.get("content-type") ?? "", text, body: text ? (JSON.parse(text) as Record<string, any>) : undefined };
}

/** The JSON body of a response, untyped (tests assert its shape). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function body(res: Response | Promise<Response>): Promise<any> {
  return (await res).json();
}
