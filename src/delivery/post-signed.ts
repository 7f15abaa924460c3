import { Agent, request } from "undici";
import { coarseDelay } from "../core/coarse-delay.ts";
import { toStorable } from "../core/storable-text.ts";
import { classifyAttempt, type AttemptVerdict } from "./classify-response.ts";
import { isJsonContentType, readReply, type ReplyRead } from "./read-reply.ts";
import { signWebhook } from "./sign-webhook.ts";

export const ATTEMPT_TIMEOUT_MS = 10_000;
/** An attempt's error is kept up to this length. */
const MAX_ERROR_CHARS = 500;

export interface AttemptResult {
  verdict: AttemptVerdict;
  status?: number;
  error: string | null;
  seconds: number;
  /** When it was sent (performance.now()): its record says so, however long after it is made. Absent: not sent. */
  sentAt?: number;
  /**
   * Callbacks: the JSON a delivered attempt's answer carried (application/json, at most 64 KiB),
   * stored as the wait's reply; undefined when it carried none. A body that could not be kept
   * leaves it undefined and says why in `error` (the attempt is delivered all the same).
   */
  reply?: unknown;
  /**
   * The caller's abort ended it (its job runner stopping), not the endpoint nor the time limit:
   * not an attempt the endpoint answered, and not to be recorded or counted against it.
   */
  abandoned?: true;
}

// undici's request() rather than node:http or fetch: measured on one 2-core box, POSTing to one
// keep-alive receiver, about 0.08 ms of CPU per callback against node:http's 0.14 (fetch, built on
// undici, adds the WHATWG layers: 0.23-0.36). Callbacks share the cores with intake and Postgres.
// One agent per process keeps connections alive per origin; redirects are never followed.
const agent = new Agent({ keepAliveTimeout: 4_000, connect: { timeout: ATTEMPT_TIMEOUT_MS } });

/**
 * One attempt to POST an event, signed per Standard Webhooks (`webhook-id` = the event id, so a
 * retry carries the same id), with a time limit and no redirects followed (a 3xx is an answer,
 * and not a 2xx). With `readReplies` (callbacks), a 2xx JSON answer's body is read as the reply,
 * within the same time limit.
 */
export async function postSigned(url: string, eventId: string, body: string, key: Uint8Array, abort?: AbortSignal, readReplies = false): Promise<AttemptResult> {
  const headers: Record<string, string> = { "content-type": "application/json", "user-agent": "signalbox", ...signWebhook(key, eventId, Math.floor(Date.now() / 1000), body) };
  const started = performance.now();
  let status: number | undefined;
  let error: string | null = null;
  let reply: ReplyRead = {};
  // The time limit and the caller's abort end the request through one controller: a timer per
  // request (AbortSignal.timeout) and AbortSignal.any cost a tenth of a callback's CPU.
  const stop = new AbortController();
  let timedOut = false;
  let answered = false;
  void coarseDelay(ATTEMPT_TIMEOUT_MS).then(() => {
    if (!answered) timedOut = true;
    // Answered or not: a body still coming at the limit is cut off (drained unread, a body that
    // never ends would hold its connection for good). One that ended is beyond its reach.
    stop.abort();
  });
  const onAbort = () => stop.abort();
  if (abort?.aborted) stop.abort();
  else abort?.addEventListener("abort", onAbort, { once: true });
  try {
    ({ status, reply } = await post(url, body, headers, stop.signal, readReplies));
    if (status < 200 || status >= 300) error = `HTTP ${status}`;
  } catch (err) {
    error = `request failed: ${timedOut ? `no answer within ${ATTEMPT_TIMEOUT_MS / 1000} s` : describe(err)}`;
  } finally {
    answered = true;
    abort?.removeEventListener("abort", onAbort);
  }
  if ("note" in reply) error = reply.note;
  // Recorded as text: what an endpoint put in it (a parser's message quotes the body) must not
  // keep the attempt, and the batch recorded with it, from being recorded.
  if (error !== null) error = toStorable(error.slice(0, MAX_ERROR_CHARS));
  const abandoned = status === undefined && !timedOut && abort?.aborted === true;
  return {
    verdict: classifyAttempt(status),
    status,
    error,
    seconds: (performance.now() - started) / 1000,
    sentAt: started,
    ...("value" in reply ? { reply: reply.value } : {}),
    ...(abandoned ? { abandoned } : {}),
  };
}

/**
 * Resolves with the status as soon as the answer's head arrives (its body is drained, unread),
 * or, for a 2xx JSON answer when replies are read, once its body is read.
 */
async function post(url: string, body: string, headers: Record<string, string>, signal: AbortSignal, readReplies: boolean): Promise<{ status: number; reply: ReplyRead }> {
  const target = new URL(url);
  // Credentials in the URL's userinfo go as Basic auth, as node:http sends them (undici drops them).
  if (target.username || target.password) {
    headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`).toString("base64")}`;
    target.username = "";
    target.password = "";
  }
  const res = await request(target, { method: "POST", headers, body, signal, dispatcher: agent });
  // A body cut short, or one that never ends, does not change the answer.
  res.body.on("error", () => {});
  const status = res.statusCode;
  if (readReplies && status >= 200 && status < 300 && isJsonContentType(res.headers["content-type"])) {
    return { status, reply: await readReply(res.body, res.headers["content-length"]) };
  }
  res.body.resume();
  return { status, reply: {} };
}

function describe(err: unknown): string {
  const e = err as { code?: string; message?: string };
  // undici's "other side closed": node:http said ECONNRESET, and operators know that word.
  if (e?.code === "UND_ERR_SOCKET") return "ECONNRESET";
  return e?.code ?? e?.message ?? "unknown error";
}
