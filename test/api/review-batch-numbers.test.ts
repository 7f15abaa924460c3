// POST /signals/batch stores each payload as the single endpoint does: digit for digit, with the
// same number checks (a JSON round trip through doubles would silently change the digits).
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  for (const [name, schema] of [
    ["amount", null],
    ["bounded", { type: "object", properties: { n: { type: "number", maximum: 100 } } }],
    ["num", { type: "object", properties: { v: { type: "number" } } }],
  ] as const) {
    const res = await app.api(`/signal-types/${name}`, { method: "PUT", json: { auth: { scheme: "none" }, schema, buffer_ttl_s: 3600 } });
    expect([200, 201], await res.clone().text()).toContain(res.status);
  }
});
afterAll(async () => {
  await app?.close();
});

/** POST /signals/batch with exactly this body text; the per-item results. */
async function batch(text: string): Promise<Array<Record<string, unknown>>> {
  const res = await app.api("/signals/batch", { method: "POST", headers: { "content-type": "application/json" }, body: text });
  const answer = await res.text();
  expect(res.status, answer).toBe(200);
  return (JSON.parse(answer) as { results: Array<Record<string, unknown>> }).results;
}

async function single(run: string, signal: string, text: string): Promise<Record<string, unknown>> {
  const res = await app.api(`/signals/${run}/${signal}`, { method: "POST", headers: { "content-type": "application/json" }, body: text });
  return { status: res.status, ...((await res.json()) as Record<string, unknown>) };
}

const storedPayload = async (run: string) => (await app.database.sql`select payload from signalbox.signals where run_id = ${run}`).map((r) => r.payload);
const listed = async (run: string) => (await app.api(`/runs/${run}/signals`)).text();

it("a payload's numbers are stored and listed with the same digits as through POST /signals/{run}/{signal}", async () => {
  const payload = '{"id":12345678901234567890,"big":1e400,"neg":-0,"exact":9007199254740993,"one":1.0,"nested":[0.1e1,{"x":-12345678901234567890}]}';
  expect((await single("run-single", "amount", payload)).status).toBe(202);
  const [result] = await batch(`{"signals":[{"run_id":"run-batch","signal":"amount","payload":${payload}}]}`);
  expect(result).toMatchObject({ outcome: "buffered", status: 202 });

  expect(await storedPayload("run-batch")).toEqual(await storedPayload("run-single"));
  expect(await storedPayload("run-batch")).toEqual([payload]);
  const text = await listed("run-batch");
  for (const literal of ["12345678901234567890", "1e400", "-0", "9007199254740993", "1.0", "0.1e1", "-12345678901234567890"]) expect(text).toContain(literal);
  expect(text).not.toContain("12345678901234567000");
  expect(text).not.toContain("9007199254740992");
  expect(text).not.toMatch(/"big":null/);
});

it("each item gets the single endpoint's answer to its numbers (inexact against bounds, 1e400 against {type: number})", async () => {
  const cases: Array<[string, string]> = [
    ["bounded", '{"n":9007199254740993}'],
    ["bounded", '{"n":100.0000000000000000001}'],
    ["bounded", '{"n":1e2}'],
    ["num", '{"v":1e400}'],
    ["num", '{"v":9007199254740993}'],
  ];
  const items = cases.map(([signal, payload], i) => `{"run_id":"nb-${i}","signal":"${signal}","payload":${payload}}`);
  const results = await batch(`{"signals":[${items.join(",")}]}`);
  for (const [i, [signal, payload]] of cases.entries()) {
    const one = await single(`ns-${i}`, signal, payload);
    expect([results[i]!.outcome, results[i]!.status, results[i]!.validation_errors], payload).toEqual([one.outcome, one.status, one.validation_errors]);
  }
  expect(results.map((r) => r.status)).toEqual([422, 422, 202, 422, 202]);
});

it("a null payload is still null, and an item's idempotency key still makes a duplicate of the same payload", async () => {
  const results = await batch(
    '{"signals":[{"run_id":"nk","signal":"amount","payload":null},{"run_id":"nk","signal":"amount","payload":{"n":1.50},"idempotency_key":"k"},{"run_id":"nk","signal":"amount","payload":{"n":1.50},"idempotency_key":"k"}]}',
  );
  expect(results.map((r) => r.outcome)).toEqual(["buffered", "buffered", "duplicate"]);
  expect(await storedPayload("nk")).toEqual(expect.arrayContaining(["null", '{"n":1.50}']));
});
