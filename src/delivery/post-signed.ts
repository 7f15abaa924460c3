import { classifyAttempt, type AttemptVerdict } from "./classify-response.ts";
import { signWebhook } from "./sign-webhook.ts";

const ATTEMPT_TIMEOUT_MS = 10_000;

export interface AttemptResult {
  verdict: AttemptVerdict;
  status?: number;
  error: string | null;
  seconds: number;
}

/**
 * One attempt to POST an event, signed per Standard Webhooks (`webhook-id` = the event id, so a
 * retry carries the same id), with a time limit and no redirects followed.
 */
export async function postSigned(url: string, eventId: string, body: string, key: Uint8Array, abort?: AbortSignal): Promise<AttemptResult> {
  const headers = { "content-type": "application/json", "user-agent": "signalbox", ...signWebhook(key, eventId, Math.floor(Date.now() / 1000), body) };
  const started = performance.now();
  let status: number | undefined;
  let error: string | null = null;
  try {
    const timeout = AbortSignal.timeout(ATTEMPT_TIMEOUT_MS);
    const res = await fetch(url, { method: "POST", body, headers, redirect: "manual", signal: abort ? AbortSignal.any([abort, timeout]) : timeout });
    status = res.status;
    await res.body?.cancel().catch(() => {});
    if (status < 200 || status >= 300) error = `HTTP ${status}`;
  } catch (err) {
    error = `request failed: ${describe(err)}`;
  }
  return { verdict: classifyAttempt(status), status, error, seconds: (performance.now() - started) / 1000 };
}

function describe(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === "TimeoutError") return `no answer within ${ATTEMPT_TIMEOUT_MS / 1000} s`;
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? "unknown error";
}
