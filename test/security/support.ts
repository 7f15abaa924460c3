// Shared helpers for the security tests: independent signers (the vendor packages where they
// exist, the documented recipe with node:crypto otherwise), a raw-socket HTTP client, and a
// snapshot of every table a request could change.
import { createHmac } from "node:crypto";
import { connect } from "node:net";
import { sign as octokitSign } from "@octokit/webhooks-methods";
import { Webhook as StandardWebhook } from "standardwebhooks";
import Stripe from "stripe";
import { Webhook as SvixWebhook } from "svix";
import { expect } from "vitest";
import type { TestApp } from "../helpers/test-app.ts";
import { openWait } from "../helpers/http.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { SignalTypeCache } from "../../src/signal-types/signal-type-cache.ts";

export type Hdrs = Record<string, string>;
export const nowS = () => Math.floor(Date.now() / 1000);

/** 32 fixed bytes as a Standard Webhooks secret (`whsec_` + base64). */
export const swSecret = (seed: number) => "whsec_" + Buffer.from(Array.from({ length: 32 }, (_, i) => (i * 31 + seed * 7 + 1) & 0xff)).toString("base64");

const stripe = new Stripe("sk_test_signalbox");
const hmac = (key: string | Uint8Array, ...parts: Array<string | Uint8Array>) => {
  const h = createHmac("sha256", key);
  for (const p of parts) h.update(p);
  return h.digest();
};
/** The HMAC key of a `whsec_` secret per the Standard Webhooks spec (base64 after the prefix). */
export const swKey = (secret: string) => Buffer.from(secret.replace(/^whsec_/, ""), "base64");

export interface SignOpts {
  ts?: number;
  id?: string;
}

/** Standard Webhooks signed by the `standardwebhooks` package (string bodies) or by the spec recipe (raw bytes). */
export function signStandard(secret: string, body: string | Uint8Array, o: SignOpts = {}): Hdrs {
  const ts = o.ts ?? nowS();
  const id = o.id ?? `msg_${Math.random().toString(36).slice(2)}`;
  const signature =
    typeof body === "string"
      ? new StandardWebhook(secret).sign(id, new Date(ts * 1000), body)
      : `v1,${hmac(swKey(secret), `${id}.${ts}.`, body).toString("base64")}`;
  return { "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": signature };
}

/** The same scheme signed by the `svix` package (sent with the webhook-* names signalbox reads). */
export function signSvix(secret: string, body: string, o: SignOpts = {}): Hdrs {
  const ts = o.ts ?? nowS();
  const id = o.id ?? `msg_${Math.random().toString(36).slice(2)}`;
  return { "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": new SvixWebhook(secret).sign(id, new Date(ts * 1000), body) };
}

/** Stripe-Signature from stripe-node's own test helper. */
export function signStripe(secret: string, body: string | Uint8Array, o: SignOpts = {}): Hdrs {
  const ts = o.ts ?? nowS();
  // The helper treats timestamp 0 as "now", and takes strings only: the recipe by hand then.
  if (typeof body !== "string" || ts === 0) return { "stripe-signature": `t=${ts},v1=${hmac(secret, `${ts}.`, body).toString("hex")}` };
  return { "stripe-signature": stripe.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: ts }) };
}

/** X-Hub-Signature-256 from @octokit/webhooks-methods. */
export async function signGithub(secret: string, body: string | Uint8Array): Promise<Hdrs> {
  // octokit refuses an empty payload and takes strings only: the documented recipe by hand then.
  if (typeof body !== "string" || body === "") return { "x-hub-signature-256": `sha256=${hmac(secret, body).toString("hex")}` };
  return { "x-hub-signature-256": await octokitSign(secret, body) };
}

/** Shopify's documented recipe: base64 HMAC-SHA256 of the raw body with the app secret. */
export const signShopify = (secret: string, body: string | Uint8Array): Hdrs => ({ "x-shopify-hmac-sha256": hmac(secret, body).toString("base64") });

/** Slack's documented recipe: `v0=` + hex HMAC-SHA256 of `v0:{ts}:{body}`. */
export function signSlack(secret: string, body: string | Uint8Array, o: SignOpts = {}): Hdrs {
  const ts = String(o.ts ?? nowS());
  return { "x-slack-request-timestamp": ts, "x-slack-signature": `v0=${hmac(secret, `v0:${ts}:`, body).toString("hex")}` };
}

/** The generic scheme: hex HMAC-SHA256 of the raw body in the configured header. */
export const signGeneric = (header: string) => (secret: string, body: string | Uint8Array): Hdrs => ({ [header]: hmac(secret, body).toString("hex") });

/** Everything a request could change, to compare before and after a rejected one. */
export async function snapshot(app: TestApp) {
  const [row] = await app.database.sql`select
    (select count(*)::int from signalbox.signals) as signals,
    (select coalesce(string_agg(id || ':' || outcome, ',' order by id), '') from signalbox.signals) as signal_ids,
    (select count(*)::int from signalbox.webhook_receipts) as receipts,
    (select count(*)::int from signalbox.events) as events,
    (select coalesce(string_agg(id || '=' || status, ',' order by id), '') from signalbox.waits) as waits,
    (select coalesce(string_agg(run_id || '=' || status || '/' || last_sequence, ',' order by run_id), '') from signalbox.runs) as runs,
    (select count(*)::int from signalbox.signal_types) as types`;
  return row as Record<string, unknown>;
}

/**
 * Changes a signal_types row behind the API's back (as an attacker with database access, or an
 * older version, would), then waits until the service has seen it: processes cache signal
 * types and drop one on the NOTIFY a trigger sends, so wait for the app's cache to drop it
 * (observed on the real cache of the app, which runs in this process).
 */
export async function updateTypeRow(app: TestApp, name: string, change: () => Promise<unknown>): Promise<void> {
  const cache = app.deps.signalTypeCache!;
  let dropped = false;
  cache.forget = (n: string) => {
    SignalTypeCache.prototype.forget.call(cache, n);
    if (n === name) dropped = true;
  };
  try {
    await change();
    await waitFor(`the app's signal type cache to drop ${name}`, () => dropped);
  } finally {
    delete (cache as { forget?: unknown }).forget; // the prototype's again
  }
}

/** The value of `signalbox_intake_unauthenticated_total` on /metrics. */
export async function unauthenticatedCount(app: TestApp): Promise<number> {
  const text = await (await fetch(`${app.baseUrl}/metrics`)).text();
  const m = /^signalbox_intake_unauthenticated_total (\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

/** POST /signals/{run}/{signal} with exactly these bytes and headers (content-type JSON unless given). */
export async function post(app: TestApp, run: string, signal: string, body: string | Uint8Array, headers: Hdrs = {}): Promise<Answer> {
  const res = await fetch(`${app.baseUrl}/signals/${encodeURIComponent(run)}/${encodeURIComponent(signal)}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

/** The body of a 401 intake answer without its per-request id: identical for every cause. */
export function unauthBody(a: Answer) {
  expect(a.status, a.text).toBe(401);
  expect(a.headers.get("content-type") ?? "").toMatch(/^application\/problem\+json/);
  expect(a.headers.get("www-authenticate") ?? "").toMatch(/^Bearer\b/);
  const { request_id: _id, ...rest } = a.body as Record<string, unknown>;
  return rest;
}

/** Runs `fn` (which must be refused) and asserts that no table changed and the 401 was counted. */
export async function expectRefusedUnchanged(app: TestApp, fn: () => Promise<Answer>, status = 401): Promise<Answer> {
  const before = await snapshot(app);
  const unauthBefore = await unauthenticatedCount(app);
  const a = await fn();
  expect(a.status, a.text).toBe(status);
  expect(await snapshot(app)).toEqual(before);
  if (status === 401) {
    expect(a.body).toMatchObject({ outcome: "rejected_unauthenticated", status: 401 });
    expect(await unauthenticatedCount(app)).toBe(unauthBefore + 1);
  }
  return a;
}

export interface RawResponse {
  status: number;
  head: string;
  body: string;
  /** True when the socket ended before a response arrived. */
  noResponse: boolean;
}

/**
 * One HTTP/1.1 exchange over a plain TCP socket: the bytes go out exactly as given (duplicate
 * header lines, chunk framing, conflicting lengths), a part at a time; the response is read
 * until the server closes. Write errors after the server answered are expected (it may refuse
 * before the body is done) and ignored.
 */
export function rawExchange(baseUrl: string, parts: Array<string | Buffer>, opts: { gapMs?: number; timeoutMs?: number } = {}): Promise<RawResponse> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: url.hostname, port: Number(url.port) });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response within ${opts.timeoutMs ?? 10_000} ms: ${Buffer.concat(chunks).toString("latin1").slice(0, 300)}`));
    }, opts.timeoutMs ?? 10_000);
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", () => {}); // EPIPE/ECONNRESET after an early answer
    socket.on("close", () => {
      clearTimeout(timer);
      const raw = Buffer.concat(chunks).toString("latin1");
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(raw);
      const split = raw.indexOf("\r\n\r\n");
      resolve({ status: m ? Number(m[1]) : 0, head: split < 0 ? raw : raw.slice(0, split), body: split < 0 ? "" : raw.slice(split + 4), noResponse: !m });
    });
    socket.on("connect", async () => {
      for (const p of parts) {
        if (socket.destroyed) break;
        socket.write(p);
        if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      }
    });
  });
}

/** A request head: request line, then each [name, value] as its own header line (duplicates kept). */
export function head(method: string, path: string, port: string, lines: Array<[string, string]>): string {
  return [`${method} ${path} HTTP/1.1`, `Host: 127.0.0.1:${port}`, "Connection: close", ...lines.map(([k, v]) => `${k}: ${v}`), "", ""].join("\r\n");
}

/** The body of a chunked message: each piece as one chunk, then the terminator. */
export function chunked(pieces: Buffer[]): Buffer[] {
  return [...pieces.map((p) => Buffer.concat([Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from("\r\n")])), Buffer.from("0\r\n\r\n")];
}

/** Opens a wait via the management API and returns its id. */
export async function openWaitFor(app: TestApp, run: string, signal: string): Promise<string> {
  return (await openWait(app, run, { signal }, 201)).body.id;
}

export async function waitStatus(app: TestApp, id: string): Promise<string> {
  return ((await (await app.api(`/waits/${id}`)).json()) as { status: string }).status;
}

/** PUT a signal type, asserting 200/201. */
export async function putType(app: TestApp, name: string, body: Record<string, unknown>): Promise<void> {
  const res = await app.api(`/signal-types/${name}`, { method: "PUT", json: body });
  expect([200, 201], await res.clone().text()).toContain(res.status);
}

/** The run's signal log as raw response text and parsed. */
export async function runSignals(app: TestApp, run: string): Promise<{ text: string; items: Array<Record<string, unknown>> }> {
  const res = await app.api(`/runs/${encodeURIComponent(run)}/signals?limit=500`);
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return { text, items: (JSON.parse(text) as { items: Array<Record<string, unknown>> }).items };
}
