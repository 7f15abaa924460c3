import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";

// The document must describe what the server answers: walks the main routes through their
// success and error answers, and checks each against openapi.json (the status is listed for the
// operation, the content type is one listed for that status, the body validates against the
// schema given for it, a documented Retry-After is sent). Every mismatch is collected, so one run
// lists them all.

type Media = { schema?: Record<string, unknown> };
type Operation = { operationId: string; responses: Record<string, { content?: Record<string, Media>; headers?: Record<string, unknown> }> };
type Doc = { paths: Record<string, Record<string, Operation>>; components: Record<string, unknown> };

let app: TestApp;
let doc: Doc;
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
const mismatches: string[] = [];
const covered = new Set<string>();

beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_SSE_HEARTBEAT_S: "0.2" } });
  doc = (await (await fetch(`${app.baseUrl}/openapi.json`)).json()) as Doc;
});
afterAll(async () => {
  await app?.close();
});

const validators = new Map<string, ReturnType<typeof ajv.compile>>();
/** A schema of the document, its `#/components/...` references resolved against the document. */
function validatorFor(key: string, schema: Record<string, unknown>) {
  let v = validators.get(key);
  if (!v) validators.set(key, (v = ajv.compile({ ...schema, components: doc.components })));
  return v;
}

/**
 * Sends a request and checks its answer against the operation `method template`; returns the
 * answer's status and parsed body (JSON, or the text).
 */
async function call(method: string, template: string, path: string, init: RequestInit & { json?: unknown; token?: boolean } = {}): Promise<{ status: number; body: any }> {
  const { token = true, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (!token) headers.set("authorization", "");
  const res = await app.api(path, { ...rest, method, headers });
  const text = await res.text();
  const where = `${method} ${path} -> ${res.status}`;
  const op = doc.paths[template]?.[method.toLowerCase()];
  if (!op) {
    mismatches.push(`${where}: no operation ${method} ${template} in the document`);
    return { status: res.status, body: text };
  }
  covered.add(`${op.operationId} ${res.status}`);
  const documented = op.responses[String(res.status)];
  const type = (res.headers.get("content-type") ?? "").split(";")[0]!.trim();
  let body: any = text;
  if (type.endsWith("json") && text) body = JSON.parse(text);
  if (!documented) {
    mismatches.push(`${where} (${op.operationId}): status not documented (documented: ${Object.keys(op.responses).join(", ")}); ${type} ${text.slice(0, 160)}`);
    return { status: res.status, body };
  }
  const contents = documented.content ?? {};
  if (Object.keys(contents).length === 0) {
    if (text.length > 0) mismatches.push(`${where} (${op.operationId}): documented without a body, answered ${type} ${text.slice(0, 80)}`);
  } else if (!contents[type]) {
    mismatches.push(`${where} (${op.operationId}): content type '${type}' not documented (documented: ${Object.keys(contents).join(", ")})`);
  } else if (type.endsWith("json")) {
    const validate = validatorFor(`${op.operationId} ${res.status} ${type}`, contents[type]!.schema ?? {});
    if (!validate(body)) mismatches.push(`${where} (${op.operationId}): body breaks the documented schema: ${ajv.errorsText(validate.errors)}; body ${text.slice(0, 200)}`);
  }
  for (const name of Object.keys(documented.headers ?? {})) {
    if (!res.headers.has(name)) mismatches.push(`${where} (${op.operationId}): documented header ${name} missing`);
  }
  if (res.status >= 400 && type !== "application/problem+json" && type !== "text/html") mismatches.push(`${where} (${op.operationId}): an error that is not problem+json (${type})`);
  return { status: res.status, body };
}

describe("real answers against openapi/openapi.json", () => {
  it("operations, signal types, waits, signals, runs and events answer as documented", async () => {
    // Operations
    await call("GET", "/healthz", "/healthz", { token: false });
    await call("GET", "/readyz", "/readyz", { token: false });
    const verbose = await call("GET", "/readyz", "/readyz?verbose", { token: false });
    const twice = await call("GET", "/readyz", "/readyz?verbose=1&verbose=2", { token: false }); // a proxy may add its own
    expect(Object.keys(twice.body)).toEqual(Object.keys(verbose.body));
    await call("GET", "/metrics", "/metrics", { token: false });

    // Signal types
    const type = { description: "Manager approves", schema: { type: "object", required: ["response"], properties: { response: { type: "string" } } }, auth: { scheme: "none" }, buffer_ttl_s: 0, responses: ["approve", "reject"] };
    await call("PUT", "/signal-types/{name}", "/signal-types/approval", { json: type });
    await call("PUT", "/signal-types/{name}", "/signal-types/approval", { json: type });
    await call("PUT", "/signal-types/{name}", "/signal-types/buffered", { json: { auth: { scheme: "none" }, buffer_ttl_s: 60 } });
    await call("PUT", "/signal-types/{name}", "/signal-types/bad", { json: { auth: { scheme: "nope" } } });
    await call("PUT", "/signal-types/{name}", "/signal-types/bad", { json: { auth: { scheme: "none" }, schema: { type: 12 } } });
    await call("PUT", "/signal-types/{name}", "/signal-types/approval", { json: type, token: false });
    await call("GET", "/signal-types/{name}", "/signal-types/approval");
    await call("GET", "/signal-types/{name}", "/signal-types/nope");
    await call("GET", "/signal-types/{name}", "/signal-types/-bad-");
    await call("GET", "/signal-types", "/signal-types?limit=1");
    await call("GET", "/signal-types", "/signal-types?limit=0");
    await call("PUT", "/signal-types/{name}", "/signal-types/gone", { json: { auth: { scheme: "none" } } });
    await call("DELETE", "/signal-types/{name}", "/signal-types/gone");
    await call("DELETE", "/signal-types/{name}", "/signal-types/gone");

    // Waits
    const wait = (await call("POST", "/runs/{run}/waits", "/runs/order-1/waits", { json: { signal: "approval", key: "step-1", timeout_s: 3600, metadata: { assignee: "kim" } } })).body;
    await call("POST", "/runs/{run}/waits", "/runs/order-1/waits", { json: { signal: "approval", key: "step-1", timeout_s: 3600, metadata: { assignee: "kim" } } });
    await call("POST", "/runs/{run}/waits", "/runs/order-1/waits", { json: { signal: "approval" } });
    await call("POST", "/runs/{run}/waits", "/runs/order-1/waits", { json: { signal: "unknown" } });
    await call("POST", "/runs/{run}/waits", "/runs/order-1/waits", { json: { signal: "approval", timeout_s: -1 } });
    await call("POST", "/runs/{run}/waits", "/runs/order-1/waits", { json: { signal: "timer-1", timer: { delay_s: 3600 } } });
    await call("GET", "/runs/{run}/waits", "/runs/order-1/waits?status=waiting");
    await call("GET", "/waits", "/waits?signal=approval&status=waiting&metadata.assignee=kim");
    await call("GET", "/waits", "/waits?deadline_before=nonsense");
    await call("GET", "/waits/{id}", `/waits/${wait.id}`);
    await call("GET", "/waits/{id}", `/waits/${wait.id}?wait_s=0.1`);
    await call("GET", "/waits/{id}", `/waits/${wait.id}?wait_s=61`);
    await call("GET", "/waits/{id}", "/waits/wt_nope");
    await call("POST", "/waits/{id}/links", `/waits/${wait.id}/links`, { json: { ttl_s: 600, responder: "kim@example.com" } });
    await call("POST", "/waits/{id}/redeliver", `/waits/${wait.id}/redeliver`, { json: {} });
    await call("GET", "/waits/{id}/deliveries", `/waits/${wait.id}/deliveries`);
    await call("GET", "/deliveries", "/deliveries");

    // Signals
    const signal = (body: unknown, key?: string, run = "order-1", name = "approval") =>
      call("POST", "/signals/{run}/{signal}", `/signals/${run}/${name}`, { token: false, headers: { "content-type": "application/json", ...(key ? { "idempotency-key": key } : {}) }, body: typeof body === "string" ? body : JSON.stringify(body) });
    await signal({ response: "maybe" }, "k0");
    const sent = (await signal({ response: "approve" }, "k1")).body;
    await signal({ response: "approve" }, "k1");
    await signal({ response: "reject" }, "k1");
    await signal({ response: "approve" }, "k2");
    await signal({ response: "approve" }, "k3", "order-1", "unknown");
    await signal("{not json", "k4");
    await signal({ any: 1 }, "k5", "order-1", "buffered");
    await signal("x".repeat(app.config.SIGNALBOX_MAX_BODY_BYTES + 10), "k6");
    await call("GET", "/signals/{id}", `/signals/${sent.signal_id}`);
    await call("GET", "/signals/{id}", "/signals/sg_nope");
    await call("GET", "/runs/{run}/signals", "/runs/order-1/signals");
    await call("GET", "/signals", "/signals?outcome=rejected_not_waiting");
    await call("POST", "/signals/batch", "/signals/batch", { json: { signals: [{ run_id: "order-2", signal: "buffered", payload: { n: 1 }, idempotency_key: "b1" }] } });
    await call("POST", "/waits/{id}/cancel", `/waits/${wait.id}/cancel`, { json: {} });
    await call("POST", "/waits/{id}/redeliver", `/waits/${wait.id}/redeliver`, { json: {} });

    // Runs
    await call("GET", "/runs/{run}", "/runs/order-1");
    await call("GET", "/runs/{run}", "/runs/never-seen");
    await call("GET", "/runs/{run}", "/runs/bad%20run");
    await call("POST", "/runs/{run}/pause", "/runs/order-1/pause", { json: { reason: "audit", by: "kim" } });
    await call("POST", "/runs/{run}/checkpoints/{name}", "/runs/order-1/checkpoints/step-2?wait_s=0.1", { json: {} });
    await call("POST", "/runs/{run}/resume", "/runs/order-1/resume", { json: { by: "kim" } });
    await call("POST", "/runs/{run}/children", "/runs/order-1/children", { json: { run_id: "order-1-child" } });
    await call("DELETE", "/runs/{run}/children", "/runs/order-1/children?run_id=order-1-child");
    await call("GET", "/runs/{run}/start", "/runs/order-1/start");
    const page = (await call("GET", "/runs/{run}/events", "/runs/order-1/events?limit=2")).body;
    await call("GET", "/runs/{run}/events", `/runs/order-1/events?after=${page.next_cursor}`);
    await call("GET", "/runs/{run}/events", "/runs/order-1/events?after=nonsense");
    const streamed = await fetch(`${app.baseUrl}/runs/order-1/events`, { headers: { authorization: `Bearer ${API_KEY}`, accept: "text/event-stream" } });
    expect(streamed.headers.get("content-type")).toBe("text/event-stream");
    expect(doc.paths["/runs/{run}/events"]!.get!.responses["200"]!.content!["text/event-stream"]).toBeDefined();
    await streamed.body!.cancel();
    await call("POST", "/runs/{run}/cancel", "/runs/order-1/cancel", { json: { reason: "done", by: "kim" } });
    await call("POST", "/runs/{run}/pause", "/runs/order-1/pause", { json: {} });
    await call("POST", "/runs/{run}/continue", "/runs/order-3/continue", { json: { run_id: "order-3b" } });
    await call("POST", "/runs/{run}/waits", "/runs/order-1/waits", { json: { signal: "approval" } });
    await signal({ response: "approve" }, "k7");
    await call("POST", "/runs/{run}/checkpoints/{name}", "/runs/order-1/checkpoints/step-3", { json: {} });

    // The checks saw the answers they were written for (a typo in a path would check nothing).
    for (const seen of ["getWait 200", "openWait 201", "sendSignal 202", "sendSignal 409", "listRunEvents 200", "getReadiness 200", "createApprovalLinks 200", "continueRun 200"]) expect(covered).toContain(seen);

    expect(mismatches).toEqual([]);
  });
});
