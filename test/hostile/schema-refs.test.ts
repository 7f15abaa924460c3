import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { killServices, onDatabase, startService, type ServiceProcess } from "../helpers/service-process.ts";
import { whileProbingHealth } from "../helpers/probes.ts";
import { createTestDatabase } from "../helpers/test-app.ts";

// Local $refs multiply a schema: every reference stands for the whole subschema it points to.
// A small schema that expands to a huge one must not take the process down at PUT (ajv used to
// copy the subschema's code into every reference site), nor make each signal slow to check.

let db: { url: string; drop(): Promise<void> };
let svc: ServiceProcess;
beforeAll(async () => {
  db = await createTestDatabase();
  // A bounded heap makes an exhausting compile fail fast instead of eating the machine's memory.
  svc = await startService(onDatabase(db.url, { NODE_OPTIONS: "--max-old-space-size=384" }));
});
afterAll(async () => {
  killServices();
  await db?.drop();
});

let n = 0;
/** PUTs a signal type with `schema`; answers the status, body and time taken. */
async function putSchema(schema: unknown) {
  const started = Date.now();
  const res = await svc.api(`/signal-types/refs-${++n}`, { method: "PUT", json: { auth: { scheme: "none" }, schema, buffer_ttl_s: 600 }, timeoutMs: 20_000 }).catch((err: Error) => err);
  if (res instanceof Error) return { status: 0, text: res.message, ms: Date.now() - started };
  return { status: res.status, text: await res.text(), ms: Date.now() - started };
}

/** `{ $defs: { l: 300 string properties }, allOf: refs × { $ref: l } }`: 23 KB with 100 refs, 42 KB with 1000. */
function manyRefs(refs: number) {
  const properties = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`p${i}`, { type: "string", minLength: 1, maxLength: 5, format: "email" }]));
  return { $defs: { l: { type: "object", properties } }, allOf: Array(refs).fill({ $ref: "#/$defs/l" }) };
}

describe("a schema whose local $refs expand it enormously", () => {
  for (const refs of [1000, 100]) {
    it(`${refs} refs to a 300-property subschema: a quick answer, the process alive, /healthz responsive`, async () => {
      const { result, slowestHealthz } = await whileProbingHealth(svc.baseUrl, () => putSchema(manyRefs(refs)));
      expect(svc.alive(), svc.output().slice(-2000)).toBe(true);
      expect([201, 422], result.text).toContain(result.status);
      expect(result.ms).toBeLessThan(3000);
      expect(slowestHealthz).toBeLessThan(1000);
    });
  }

  it("20 refs (within bounds) is compiled once per subschema: 201 at once, and a signal is checked at once", async () => {
    // Each $ref compiled inline, this took 2 s and 300 MB at PUT, and again at the first signal.
    const { result, slowestHealthz } = await whileProbingHealth(svc.baseUrl, async () => {
      const put = await putSchema(manyRefs(20));
      const started = Date.now();
      const signal = await fetch(`${svc.baseUrl}/signals/run-1/refs-${n}`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"p0":""}' });
      return { put, signal: signal.status, signalMs: Date.now() - started };
    });
    expect(result.put.status, result.put.text).toBe(201);
    expect(result.put.ms).toBeLessThan(1000);
    expect(result.signal).toBe(422);
    expect(result.signalMs).toBeLessThan(1000);
    expect(slowestHealthz).toBeLessThan(1000);
  });

  it("a 2 KB chain of references that expands to 10^7 checks is refused at PUT", async () => {
    // d7 → 10 × d6 → … → 10^7 × d0: each signal would take seconds and millions of errors.
    const $defs: Record<string, unknown> = { d0: { type: "string", minLength: 1 } };
    for (let i = 1; i <= 7; i++) $defs[`d${i}`] = { allOf: Array(10).fill({ $ref: `#/$defs/d${i - 1}` }) };
    const res = await putSchema({ $defs, $ref: "#/$defs/d7" });
    expect(res.status, res.text).toBe(422);
    expect(JSON.parse(res.text).validation_errors).toEqual([{ path: "/schema", message: expect.stringMatching(/expand/) }]);
  });

  it("a recursive reference is refused at PUT (two refs per level would double the work at each level of the payload)", async () => {
    const schema = { $defs: { a: { type: "object", properties: { x: { allOf: [{ $ref: "#/$defs/a" }, { $ref: "#/$defs/a" }] } } } }, $ref: "#/$defs/a" };
    const res = await putSchema(schema);
    expect(res.status, res.text).toBe(422);
    expect(JSON.parse(res.text).validation_errors).toEqual([{ path: "/schema/$defs/a/properties/x/allOf/0/$ref", message: expect.stringMatching(/recursive/) }]);
  });

  it("ordinary reuse of $defs is accepted and validates signals", async () => {
    const address = { type: "object", required: ["city"], properties: { city: { type: "string", minLength: 1 }, zip: { type: "string" } } };
    const schema = { $defs: { address }, type: "object", properties: { billing: { $ref: "#/$defs/address" }, shipping: { $ref: "#/$defs/address" } } };
    const res = await putSchema(schema);
    expect(res.status, res.text).toBe(201);
    const send = (body: unknown) => fetch(`${svc.baseUrl}/signals/run-1/refs-${n}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    expect((await send({ billing: { city: "Oslo" }, shipping: { city: "Bergen" } })).status).toBe(202);
    expect((await send({ billing: { city: "Oslo" }, shipping: { zip: "5003" } })).status).toBe(422);
  });
});
