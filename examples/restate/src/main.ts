// A refund that needs a manager's approval, as a Restate workflow paused on a durable promise
// that signalbox's callback resolves.
//
//   ingress: POST /refund/{id}/run ──▶ run(): open the wait (ctx.run) ──▶ await ctx.promise("approval") … suspended …
//   signalbox ──callback──▶ POST /signalbox ──▶ ingress: POST /refund/{id}/resolveApproval ──▶ the promise resolves ──▶ run() returns
//
// While the workflow waits, Restate suspends it: no process holds it, and neither a restart of
// this service nor of restate-server loses it. The callback goes through Restate's ingress with
// the event id as the idempotency key, so a callback that signalbox delivers twice reaches the
// workflow once.
import http from "node:http";
import http2 from "node:http2";
import * as restate from "@restatedev/restate-sdk";
import { createClient, nodeCallbackHandler, type ResumeEvent, type SignalboxEvent } from "@signalbox/client";

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const PORT = Number(env("PORT", "9000")); // the callback endpoint
const SERVICE_PORT = Number(env("SERVICE_PORT", "9080")); // the Restate service endpoint (HTTP/2), registered with restate-server
const PUBLIC_URL = env("PUBLIC_URL", `http://127.0.0.1:${PORT}`); // where signalbox reaches the callback endpoint
const RESTATE_INGRESS = env("RESTATE_INGRESS_URL", "http://127.0.0.1:8080");
const CALLBACK_SECRET = env("SIGNALBOX_CALLBACK_SECRET"); // whsec_…, the secret signalbox signs callbacks with

const signalbox = createClient({ baseUrl: env("SIGNALBOX_URL", "http://127.0.0.1:8080"), token: env("SIGNALBOX_TOKEN") });

interface Refund {
  customer: string;
  amount: number;
}

/** What signalbox told the workflow: the callback's type, and the signal's payload when one came. */
interface Resumed {
  type: ResumeEvent["type"];
  payload: unknown;
}

const refund = restate.workflow({
  name: "refund",
  handlers: {
    // Runs once per workflow id (`ctx.key`), which is also the run id in signalbox.
    run: async (ctx: restate.WorkflowContext, request: Refund) => {
      // Journaled: on a replay the wait is not opened again. Were the call itself retried before
      // its result was journaled, the wait's `key` makes signalbox return the same wait.
      const waitId = await ctx.run("open approval wait", async () => {
        const wait = await signalbox.waits.open(`refund-${ctx.key}`, {
          signal: "refund-approval",
          key: "approval",
          timeout_s: 2 * 24 * 3600,
          callback_url: `${PUBLIC_URL}/signalbox`,
          metadata: { restate_workflow: "refund", restate_key: ctx.key, customer: request.customer, amount: String(request.amount) },
        });
        return wait.id;
      });
      ctx.console.info(`refund ${ctx.key}: waiting for approval (${waitId})`);
      // Suspends until resolveApproval below resolves it: a received signal, a timeout or a cancel.
      const resumed = await ctx.promise<Resumed>("approval");
      if (resumed.type !== "signal.received") return { refund: ctx.key, status: "no answer", decision: null };
      const decision = resumed.payload as { approved: boolean };
      return { refund: ctx.key, status: decision.approved ? "refunded" : "rejected", decision };
    },
    // A shared handler: it runs while `run` is suspended, and only resolves the promise.
    resolveApproval: async (ctx: restate.WorkflowSharedContext, resumed: Resumed) => {
      await ctx.promise<Resumed>("approval").resolve(resumed);
    },
  },
});

// The callback: signalbox POSTs here when the wait leaves `waiting`; the handler has verified the
// signature first. Forwarded to the workflow through Restate's ingress. A failure here (Restate
// unreachable) throws, the handler answers 500, and signalbox retries with the same event id.
async function onEvent(event: SignalboxEvent): Promise<void> {
  if (event.type !== "signal.received" && event.type !== "signal.timeout" && event.type !== "signal.cancelled") return;
  const { restate_workflow, restate_key } = event.wait.metadata as { restate_workflow: string; restate_key: string };
  const resumed: Resumed = { type: event.type, payload: event.wait.result?.payload ?? null };
  const res = await fetch(`${RESTATE_INGRESS}/${restate_workflow}/${encodeURIComponent(restate_key)}/resolveApproval`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": event.id },
    body: JSON.stringify(resumed),
  });
  if (!res.ok) throw new Error(`Restate ingress answered ${res.status}: ${await res.text()}`);
}

await signalbox.signalTypes.put("refund-approval", {
  description: "A manager approves or rejects a refund",
  schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" }, approver: { type: "string" } } },
  auth: { scheme: "none" }, // real senders sign: { scheme: "standard-webhooks", secrets: ["whsec_…"] }
});

const services = http2.createServer(restate.createEndpointHandler({ services: [refund] }));
const callbacks = http.createServer(nodeCallbackHandler({ secret: CALLBACK_SECRET, onEvent }));
await Promise.all([
  new Promise<void>((resolve) => services.listen(SERVICE_PORT, "127.0.0.1", resolve)),
  new Promise<void>((resolve) => callbacks.listen(PORT, "127.0.0.1", resolve)),
]);
console.log(`Restate example listening on ${PUBLIC_URL}, service endpoint on http://127.0.0.1:${SERVICE_PORT}`);

// Nothing to drain: whatever Restate had in flight here it retries, and an unanswered callback
// is retried by signalbox.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(0));
