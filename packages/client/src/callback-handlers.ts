// Request handlers that verify and parse signalbox callbacks, for node:http, express and
// fetch-style servers (hono, Bun, Deno, workers). Each answers as signalbox expects: 204 once
// `onEvent` has finished (delivered), or 200 with the JSON it returned (the reply, which a
// sender waiting with `wait_s` receives), 401 for a request that does not verify (a permanent
// failure: signalbox does not retry it, so a wrong secret shows up as failed deliveries), and
// 500 when `onEvent` throws (signalbox retries it, with the same webhook-id).
import type { SignalboxEvent } from "./types.ts";
import { CallbackVerificationError, verifyCallback, type HeadersLike } from "./verify-callback.ts";

export interface CallbackHandlerOptions {
  /** SIGNALBOX_CALLBACK_SECRET (`whsec_…`), or several while rotating it. */
  secret: string | readonly string[];
  /**
   * Called once per verified request. Resolve to acknowledge; throw to have signalbox retry.
   * The same event can come again (at least once): deduplicate on `event.id`. A value it
   * resolves to (anything but undefined) is answered as JSON: signalbox stores it as the wait's
   * `reply` (at most 64 KiB) and hands it to a sender waiting with `wait_s`.
   */
  onEvent: (event: SignalboxEvent) => unknown;
  /** Allowed clock skew for `webhook-timestamp`, in seconds (default 300). */
  toleranceS?: number;
  /** Larger bodies are refused with 413 (default 16 MiB: a wait carries its signal's payload). */
  maxBodyBytes?: number;
  /**
   * Told about errors thrown by `onEvent`, and (node:http handler) about any other failure to
   * answer, such as a malformed `secret` or a reply JSON cannot hold (default: console.error).
   */
  onError?: (err: unknown) => void;
}

interface Answer {
  status: number;
  text?: string;
  /** JSON text: the reply. */
  json?: string;
}

const DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024;

/** The core every adapter calls: verify, hand the event over, decide the status. */
async function handle(o: CallbackHandlerOptions, headers: HeadersLike, body: Uint8Array): Promise<Answer> {
  let event: SignalboxEvent;
  try {
    event = await verifyCallback(headers, body, o.secret, { toleranceS: o.toleranceS });
  } catch (err) {
    if (err instanceof CallbackVerificationError) return { status: 401, text: err.message };
    throw err;
  }
  let reply: unknown;
  try {
    reply = await o.onEvent(event);
  } catch (err) {
    reportError(o, err);
    return { status: 500, text: "the event was not processed; signalbox will retry" };
  }
  return reply === undefined ? { status: 204 } : { status: 200, json: JSON.stringify(reply) };
}

function reportError(o: CallbackHandlerOptions, err: unknown): void {
  (o.onError ?? ((e: unknown) => console.error("signalbox callback handler:", e)))(err);
}

class BodyTooLarge extends Error {}

/** A fetch-style handler: `(request) => response`. */
export function fetchCallbackHandler(o: CallbackHandlerOptions): (request: Request) => Promise<Response> {
  return async (request) => {
    if (request.method !== "POST") return new Response("POST only", { status: 405, headers: { allow: "POST" } });
    const max = o.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    const declared = Number(request.headers.get("content-length") ?? 0);
    if (declared > max) return new Response("body too large", { status: 413 });
    // A chunked body says nothing of its size up front: read it through the limit, not whole.
    const body = await readStream(request.body, max).catch((err: unknown) => {
      if (err instanceof BodyTooLarge) return undefined;
      throw err;
    });
    if (body === undefined) return new Response("body too large", { status: 413 });
    return toResponse(await handle(o, request.headers, body));
  };
}

/** The part of hono's `Context` the handler uses. */
export interface HonoContextLike {
  req: { raw: Request; arrayBuffer(): Promise<ArrayBuffer> };
}

/**
 * A hono handler: `app.post("/signalbox", honoCallbackHandler({ secret, onEvent }))`. The body is
 * read from the request stream up to `maxBodyBytes`; if other middleware has read it already, from
 * `c.req.arrayBuffer()`, which hono caches, so it works after other middleware.
 */
export function honoCallbackHandler(o: CallbackHandlerOptions): (c: HonoContextLike) => Promise<Response> {
  return async (c) => {
    const max = o.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    let body: Uint8Array;
    try {
      // Read through the limit (a chunked body says nothing of its size up front), unless
      // middleware has consumed the stream: then hono holds the whole body already.
      body = c.req.raw.bodyUsed ? new Uint8Array(await c.req.arrayBuffer()) : await readStream(c.req.raw.body, max);
    } catch (err) {
      if (err instanceof BodyTooLarge) return new Response("body too large", { status: 413 });
      throw err;
    }
    if (body.byteLength > max) return new Response("body too large", { status: 413 });
    return toResponse(await handle(o, c.req.raw.headers, body));
  };
}

/** The parts of node's `IncomingMessage` (and express's `Request`) the handler uses. */
export interface NodeRequestLike extends AsyncIterable<Uint8Array | string> {
  method?: string;
  headers: Record<string, string | string[] | undefined>;
  /** Set by express body parsers: a Buffer from `express.raw()`, a string from `express.text()`. */
  body?: unknown;
}

/** The parts of node's `ServerResponse` (and express's `Response`) the handler uses. */
export interface NodeResponseLike {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(chunk?: string): unknown;
  /** Whether an answer has begun: then a failure cannot become a 500. */
  headersSent?: boolean;
  /** Drops the connection: for a request whose client has gone, or an answer that broke mid-way. */
  destroy?(): unknown;
}

/**
 * A node:http request listener: `http.createServer(nodeCallbackHandler({ secret, onEvent }))`.
 * Its promise never rejects: http.createServer drops it, so a rejection would be unhandled, and
 * Node ends the process on one; any request could then take the engine down.
 */
export function nodeCallbackHandler(o: CallbackHandlerOptions): (req: NodeRequestLike, res: NodeResponseLike) => Promise<void> {
  return async (req, res) => {
    try {
      if (req.method !== undefined && req.method !== "POST") return send(res, { status: 405, text: "POST only" });
      let body: Uint8Array;
      try {
        body = await readBody(req, o.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
      } catch (err) {
        if (err instanceof BodyTooLarge) return send(res, { status: 413, text: "body too large" });
        // The request broke off mid-body (the client hung up): nobody is left to answer. Not
        // reported: anyone who can reach the endpoint can do this, and the engine has nothing to fix.
        return void res.destroy?.();
      }
      send(res, await handle(o, req.headers, body));
    } catch (err) {
      // A malformed secret, a reply JSON cannot hold, a throwing onError: answer 500 (signalbox retries).
      try {
        reportError(o, err);
      } catch {
        // onError itself threw: still answer, and still do not reject.
      }
      if (res.headersSent) res.destroy?.();
      else send(res, { status: 500, text: "the event was not processed; signalbox will retry" });
    }
  };
}

/**
 * An express handler: `app.post("/signalbox", expressCallbackHandler({ secret, onEvent }))`.
 * Mount it before `express.json()`, or give its route
 * `express.raw({ type: "application/json", limit: "16mb" })`: the signature covers the exact bytes
 * sent, which a parsed-and-reserialised body no longer is. The limit matches `maxBodyBytes`:
 * express.raw()'s default (100 KB) would refuse a large payload with 413, which signalbox takes as
 * a permanent failure.
 */
export function expressCallbackHandler(o: CallbackHandlerOptions): (req: NodeRequestLike, res: NodeResponseLike, next: (err?: unknown) => void) => void {
  const node = nodeCallbackHandler(o);
  return (req, res, next) => {
    const parsed = req.body;
    if (parsed instanceof Uint8Array || typeof parsed === "string") {
      const body = typeof parsed === "string" ? new TextEncoder().encode(parsed) : parsed;
      if (body.byteLength > (o.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES)) return send(res, { status: 413, text: "body too large" });
      handle(o, req.headers, body).then((answer) => send(res, answer), next);
      return;
    }
    if (parsed !== undefined && parsed !== null && typeof parsed === "object" && Object.keys(parsed).length > 0) {
      return next(
        new Error(
          'signalbox callback: the body was parsed before the handler (express.json()?); mount the handler before it, or use express.raw({ type: "application/json", limit: "16mb" }) on its route',
        ),
      );
    }
    node(req, res).catch(next);
  };
}

async function readBody(req: AsyncIterable<Uint8Array | string>, max: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of req) {
    const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk;
    size += bytes.byteLength;
    if (size > max) throw new BodyTooLarge();
    chunks.push(bytes);
  }
  const body = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    body.set(chunk, at);
    at += chunk.byteLength;
  }
  return body;
}

/** A web stream's chunks, cancelling the stream when the reader stops early (at the size limit). */
async function* chunksOf(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}

function readStream(stream: ReadableStream<Uint8Array> | null, max: number): Promise<Uint8Array> {
  return stream === null ? Promise.resolve(new Uint8Array(0)) : readBody(chunksOf(stream), max);
}

function send(res: NodeResponseLike, answer: Answer): void {
  res.statusCode = answer.status;
  if (answer.json !== undefined) {
    res.setHeader("content-type", "application/json");
    return void res.end(answer.json);
  }
  if (answer.text === undefined) return void res.end();
  res.setHeader("content-type", "text/plain; charset=utf-8");
  res.end(answer.text);
}

function toResponse(answer: Answer): Response {
  if (answer.json !== undefined) return new Response(answer.json, { status: answer.status, headers: { "content-type": "application/json" } });
  return new Response(answer.status === 204 ? null : (answer.text ?? null), { status: answer.status, headers: answer.text ? { "content-type": "text/plain; charset=utf-8" } : {} });
}
