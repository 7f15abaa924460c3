// Payload schemas are registered at runtime, so they are untrusted input to a code-generating
// validator: refused when remote, dynamic, too big, too deep, catastrophic or not understood
// (fail closed on unknown keywords and formats); payload errors are JSON Pointers, capped at 20.
// security.md §6: #52–#55, #57–#60, #62.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { expectProblem } from "../helpers/http.ts";
import { post, putType, signStandard, snapshot, swSecret, updateTypeRow } from "./support.ts";

const SW = swSecret(8);
const AUTH = { scheme: "standard-webhooks", secrets: [SW] };

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
});
afterAll(async () => {
  await app?.close();
});

let n = 0;
const name = (p: string) => `${p}-${++n}`;
const put = (type: string, schema: unknown) => app.api(`/signal-types/${type}`, { method: "PUT", json: { auth: AUTH, schema, buffer_ttl_s: 3600 } });
const signed = (type: string, body: string) => post(app, `run-${type}`, type, body, signStandard(SW, body));

/** PUT must be refused with `status` (422 unless said) and leave the signal types as they were. */
async function refusedSchema(schema: unknown, status = 422) {
  const type = name("bad");
  const before = await snapshot(app);
  const started = Date.now();
  const res = await put(type, schema);
  const problem = await expectProblem(res, status);
  expect(Date.now() - started).toBeLessThan(5000);
  expect(await snapshot(app)).toEqual(before);
  expect((await app.api(`/signal-types/${type}`)).status).toBe(404);
  return problem;
}

async function accepted(schema: unknown): Promise<string> {
  const type = name("ok");
  await putType(app, type, { auth: AUTH, schema, buffer_ttl_s: 3600 });
  return type;
}

describe("payload errors are JSON Pointers into the payload", () => {
  it("missing required, additional property and wrong type (no coercion): /id, /extra, /amount", async () => {
    const type = await accepted({
      type: "object",
      required: ["id", "amount"],
      properties: { id: { type: "string" }, amount: { type: "integer" } },
      additionalProperties: false,
    });
    const a = await signed(type, '{"amount":"42","extra":true}');
    expect(a.status, a.text).toBe(422);
    const paths = (a.body.validation_errors as Array<{ path: string }>).map((e) => e.path).sort();
    expect(paths).toEqual(["/amount", "/extra", "/id"]);
  });

  it("keys with '/', '~' and spaces are escaped per RFC 6901: /a~1b, /m~0n, /q y, and nested /list/1/a~1b", async () => {
    const type = await accepted({
      type: "object",
      required: ["a/b", "m~n"],
      properties: { "q y": { type: "integer" }, list: { type: "array", items: { type: "object", properties: { "a/b": { type: "integer" } } } } },
    });
    const a = await signed(type, '{"q y":"no","list":[{"a/b":1},{"a/b":"x"}]}');
    expect(a.status, a.text).toBe(422);
    const paths = (a.body.validation_errors as Array<{ path: string }>).map((e) => e.path).sort();
    expect(paths).toEqual(["/a~1b", "/list/1/a~1b", "/m~0n", "/q y"]);
  });
});

describe("error volume is capped", () => {
  it("a payload with thousands of violations: 422 with exactly 20 validation_errors", async () => {
    const type = await accepted({ type: "array", items: { type: "integer" } });
    const body = JSON.stringify(Array.from({ length: 5000 }, () => "x"));
    const a = await signed(type, body);
    expect(a.status).toBe(422);
    expect(a.body.validation_errors).toHaveLength(20);
    expect(a.body.validation_errors[0]).toEqual({ path: "/0", message: expect.any(String) });
  });
  it("a 200 000-element invalid array (allErrors) still answers in under 3 s", async () => {
    const type = await accepted({ type: "array", items: { type: "integer" } });
    const body = "[" + Array(200_000).fill('"x"').join(",") + "]";
    const started = Date.now();
    const a = await signed(type, body);
    expect(a.status).toBe(422);
    expect(a.body.validation_errors).toHaveLength(20);
    expect(Date.now() - started).toBeLessThan(3000);
  });
  it("an invalid schema at PUT reports at most 20 problems", async () => {
    const problem = await refusedSchema({ type: "object", properties: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`p${i}`, { type: "nope" }])) });
    expect((problem.validation_errors ?? []).length).toBeLessThanOrEqual(20);
  });
});

describe("multipleOf divides the decimal sent, not its binary double", () => {
  it("19.99, 4.35, 0.07 and 1e308 are multiples of 0.01; 19.995 and 0.001 are not; 7.5 is a multiple of 2.5, 7.4 is not", async () => {
    const cents = await accepted({ type: "object", properties: { amount: { type: "number", multipleOf: 0.01 } } });
    for (const amount of ["19.99", "4.35", "0.07", "-0.07", "1e308", "0", "100"]) {
      const a = await signed(cents, `{"amount":${amount}}`);
      expect(a.status, `${amount}: ${a.text}`).toBe(202);
    }
    for (const amount of ["19.995", "0.001", "1e-7"]) {
      const a = await signed(cents, `{"amount":${amount}}`);
      expect(a.status, amount).toBe(422);
      expect(a.body.validation_errors).toEqual([{ path: "/amount", message: "must be multiple of 0.01" }]);
    }
    const quarters = await accepted({ type: "number", multipleOf: 2.5 });
    expect((await signed(quarters, "7.5")).status).toBe(202);
    expect((await signed(quarters, "7.4")).status).toBe(422);
  });
});

describe("property names that Object.prototype also has are ordinary names", () => {
  it("required constructor / toString / __proto__: a payload without them is 422; optional ones may be left out", async () => {
    const required = await accepted({ type: "object", required: ["constructor", "toString", "__proto__"] });
    const a = await signed(required, "{}");
    expect(a.status, a.text).toBe(422);
    expect((a.body.validation_errors as Array<{ path: string }>).map((e) => e.path).sort()).toEqual(["/__proto__", "/constructor", "/toString"]);
    expect((await signed(required, '{"constructor":1,"toString":2,"__proto__":3}')).status).toBe(202);
    const optional = await accepted({ type: "object", properties: { toString: { type: "string" }, constructor: { type: "string" } } });
    const b = await signed(optional, "{}");
    expect(b.status, b.text).toBe(202);
    expect((await signed(optional, '{"toString":5}')).status).toBe(422);
  });
});

describe("unicode: no implicit normalisation", () => {
  it('maxLength counts code points: "😀" has length 1', async () => {
    const type = await accepted({ type: "object", properties: { s: { type: "string", maxLength: 1 } } });
    expect((await signed(type, '{"s":"😀"}')).status).toBe(202);
    expect((await signed(type, '{"s":"😀😀"}')).status).toBe(422);
  });
  it("an NFD string does not match an NFC enum value (compared as code points)", async () => {
    const type = await accepted({ type: "object", properties: { s: { enum: ["\u00e9"] } } });
    expect((await signed(type, JSON.stringify({ s: "\u00e9" }))).status).toBe(202);
    expect((await signed(type, JSON.stringify({ s: "e\u0301" }))).status).toBe(422);
  });
  it("pattern is unicode-aware (the u flag): ^.$ matches one astral character", async () => {
    const type = await accepted({ type: "object", properties: { s: { type: "string", pattern: "^.$" } } });
    expect((await signed(type, '{"s":"😀"}')).status).toBe(202);
  });
});

describe("references stay local and schemas stay isolated", () => {
  it("an external $ref (URL, relative file, another $id) is refused: 422", async () => {
    for (const ref of ["https://example.com/schema.json", "other.json#/defs/x", "urn:tenant:a", "http://json-schema.org/draft-07/schema#"]) {
      const p = await refusedSchema({ type: "object", properties: { a: { $ref: ref } } });
      expect(p.validation_errors).toEqual([{ path: "/schema/properties/a/$ref", message: expect.any(String) }]);
    }
  });
  it("a $dynamicRef to a foreign id is refused", async () => {
    await refusedSchema({ $dynamicRef: "https://example.com/x#meta" });
  });
  it("local $ref and $defs work", async () => {
    const type = await accepted({ $defs: { pos: { type: "integer", minimum: 1 } }, type: "object", properties: { n: { $ref: "#/$defs/pos" } } });
    expect((await signed(type, '{"n":1}')).status).toBe(202);
    expect((await signed(type, '{"n":0}')).status).toBe(422);
  });
  it("two types may use the same $id: each is compiled on its own, neither sees the other", async () => {
    const t1 = await accepted({ $id: "urn:shared:x", type: "object", required: ["a"] });
    const t2 = await accepted({ $id: "urn:shared:x", type: "object", required: ["b"] });
    expect((await signed(t1, '{"a":1}')).status).toBe(202);
    expect((await signed(t2, '{"b":1}')).status).toBe(202);
    expect((await signed(t2, '{"a":1}')).status).toBe(422);
  });
  it("a $ref to another type's $id does not resolve: 422", async () => {
    await accepted({ $id: "urn:tenant:a:order", type: "object" });
    await refusedSchema({ type: "object", properties: { o: { $ref: "urn:tenant:a:order" } } });
  });
});

describe("size and depth", () => {
  it("a schema nested 40 deep: 422 (the schema depth cap is 32)", async () => {
    let schema: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < 40; i++) schema = { not: schema };
    await refusedSchema(schema);
  });
  it("a schema nested 500 deep: 400 (the management body depth guard answers first), quickly, and the service stays healthy", async () => {
    let schema: Record<string, unknown> = { type: "string" };
    for (let i = 0; i < 500; i++) schema = { not: schema };
    await refusedSchema(schema, 400);
    expect((await fetch(`${app.baseUrl}/healthz`)).status).toBe(200);
  });
  it("a 100 kB schema: 422 (the schema size cap is 64 KiB)", async () => {
    const properties = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`property_number_${i}`, { type: "string" }]));
    await refusedSchema({ type: "object", properties });
  });
  it("a 5 MB schema: 413 from the body limit", async () => {
    const res = await app.api(`/signal-types/${name("huge")}`, { method: "PUT", json: { auth: AUTH, schema: { description: "x".repeat(5 * 1024 * 1024) } } });
    await expectProblem(res, 413);
    expect((await fetch(`${app.baseUrl}/healthz`)).status).toBe(200);
  });
});

describe("patterns run in linear time; dynamic constructs are refused at PUT", () => {
  // Patterns that backtrack catastrophically in a backtracking engine: on RE2 they cannot, so
  // they are accepted (slugs such as ^[a-z]+(-[a-z]+)*$ were refused while they could), and a
  // hostile string is answered (a backtracking engine would take longer than the test's limit).
  const patterns = ["^(a+)+$", "^(a*)*$", "^(a|aa)+$", "^((a)+)+$", "^((a|b))+$", "(?:x+y?)+z", "^(?<g>a+)+$", "^(\\w+\\s?)*$", "(.*a){12}", "^[a-z]+(-[a-z]+)*$"];
  for (const pattern of patterns) {
    it(`pattern ${pattern}: accepted, and a 50,000-character near miss is a 422`, async () => {
      const type = await accepted({ type: "object", properties: { s: { type: "string", pattern } } });
      const res = await signed(type, JSON.stringify({ s: `${"a".repeat(50_000)}!` }));
      expect([202, 422]).toContain(res.status);
    });
  }
  it("a patternProperties key and a propertyNames pattern of that shape: accepted", async () => {
    await accepted({ type: "object", patternProperties: { "^(a+)+$": { type: "string" } } });
    await accepted({ type: "object", propertyNames: { pattern: "^(a+)+$" } });
  });
  it("a pattern longer than 1000 characters: 422", async () => {
    await refusedSchema({ type: "string", pattern: "a".repeat(1001) });
  });
  it("an invalid regular expression: 422", async () => {
    await refusedSchema({ type: "string", pattern: "([a-z" });
  });
  it("$data references: 422", async () => {
    await refusedSchema({ type: "object", properties: { a: { type: "number" }, b: { type: "number", maximum: { $data: "1/a" } } } });
    await refusedSchema({ type: "object", properties: { p: { type: "string" }, s: { type: "string", pattern: { $data: "1/p" } } } });
  });
  it("uniqueItems over objects or untyped items (quadratic; maxItems does not bound it under allErrors): 422", async () => {
    for (const schema of [
      { type: "array", uniqueItems: true },
      { type: "array", items: { type: "object" }, uniqueItems: true, maxItems: 10 },
      { type: "object", properties: { list: { type: "array", items: { type: "array" }, uniqueItems: true } } },
    ]) {
      const p = await refusedSchema(schema);
      expect(p.validation_errors?.[0]?.path).toMatch(/\/uniqueItems$/);
    }
  });
  it("uniqueItems over scalar items is allowed and linear: 100 000 integers in under 1 s", async () => {
    const type = await accepted({ type: "array", items: { type: "integer" }, uniqueItems: true });
    const started = Date.now();
    const ok = await signed(type, JSON.stringify(Array.from({ length: 100_000 }, (_, i) => i)));
    expect(ok.status).toBe(202);
    const dup = await signed(type, JSON.stringify([...Array.from({ length: 100_000 }, (_, i) => i), 5]));
    expect(dup.status).toBe(422);
    expect(Date.now() - started).toBeLessThan(1500);
  });
  it("a property named uniqueItems, or uniqueItems inside an enum value, is not the keyword", async () => {
    await accepted({ type: "object", properties: { uniqueItems: { type: "boolean" } } });
    await accepted({ enum: [{ uniqueItems: true }] });
  });
  it("escaped look-alikes are not refused: \\(a+\\)+ and [(+)]+ are linear", async () => {
    await accepted({ type: "string", pattern: "^\\(a+\\)+$" });
    await accepted({ type: "string", pattern: "^[(+)*]+$" });
  });
});

describe("fail closed on what the validator does not understand", () => {
  it("an unknown keyword (the typo maxLenght): 422, where it would otherwise be silently ignored", async () => {
    const p = await refusedSchema({ type: "object", properties: { name: { type: "string", maxLenght: 3 } } });
    expect(p.validation_errors?.[0]?.message).toMatch(/maxLenght/);
  });
  it("vendor extension keywords (x-...) are unknown keywords too: 422", async () => {
    await refusedSchema({ type: "object", "x-internal": true });
  });
  it("an unknown format: 422", async () => {
    const p = await refusedSchema({ type: "string", format: "emial" });
    expect(p.validation_errors?.[0]?.message).toMatch(/emial/);
  });
  it("$schema draft-04 or an unknown meta-schema: 422; draft 2020-12 is accepted", async () => {
    await refusedSchema({ $schema: "http://json-schema.org/draft-04/schema#", type: "object" });
    await refusedSchema({ $schema: "https://evil.example/meta", type: "object" });
    await accepted({ $schema: "https://json-schema.org/draft/2020-12/schema", type: "object" });
  });
  it("ordinary schemas still pass: union types, required without properties, annotations, prefixItems", async () => {
    await accepted({ type: ["string", "null"] });
    await accepted({ type: "object", required: ["x"] });
    await accepted({ title: "t", description: "d", $comment: "c", examples: [1], default: {}, deprecated: false, readOnly: true, type: "object" });
    await accepted({ type: "array", prefixItems: [{ type: "string" }], items: false });
    await accepted({ if: { type: "string" }, then: { minLength: 1 }, else: { type: "number" } });
  });
  it("known formats are checked: email, date-time, uuid, uri, ipv4", async () => {
    const type = await accepted({
      type: "object",
      properties: { e: { format: "email" }, d: { format: "date-time" }, u: { format: "uuid" }, l: { format: "uri" }, ip: { format: "ipv4" } },
    });
    expect((await signed(type, JSON.stringify({ e: "kim@example.com", d: "2026-11-22T06:00:00Z", u: "0b6e8f0e-4f3c-4b8e-9d5e-2b1a3c4d5e6f", l: "https://example.com/x", ip: "10.0.0.1" }))).status).toBe(202);
    const bad = await signed(type, JSON.stringify({ e: "not-an-email", d: "yesterday", u: "nope", l: "::", ip: "999.1.1.1" }));
    expect(bad.status).toBe(422);
    expect((bad.body.validation_errors as Array<{ path: string }>).map((e) => e.path).sort()).toEqual(["/d", "/e", "/ip", "/l", "/u"]);
  });
  it("a schema stored before this policy (unknown keyword in the row) still validates at intake: no 5xx", async () => {
    const type = await accepted({ type: "object", required: ["a"] });
    await updateTypeRow(app, type, () => app.database.sql`update signalbox.signal_types set schema = ${JSON.stringify({ type: "object", required: ["a"], maxLenght: 3 })}::jsonb where name = ${type}`);
    expect((await signed(type, '{"a":1}')).status).toBe(202);
    expect((await signed(type, '{"b":1}')).status).toBe(422);
  });
});

describe("adversarial payloads against patterns that passed the check stay fast", () => {
  it("an email-like pattern against 100 000 characters without the '@': under 1 s", async () => {
    const type = await accepted({ type: "object", properties: { e: { type: "string", pattern: "^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$" } } });
    const started = Date.now();
    const a = await signed(type, JSON.stringify({ e: "a".repeat(100_000) + "!" }));
    expect(a.status).toBe(422);
    expect(Date.now() - started).toBeLessThan(1000);
  });
  it('a pattern with one quantified class against "a"*30 + "!": under 1 s', async () => {
    const type = await accepted({ type: "object", properties: { s: { type: "string", pattern: "^[a-z]+[0-9]*$" } } });
    const started = Date.now();
    const a = await signed(type, JSON.stringify({ s: "a".repeat(30) + "!" }));
    expect(a.status).toBe(422);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

describe("numbers a double cannot hold", () => {
  it("const, enum or a bound out of double range (1e400) is 422 naming the keyword, not stored as null", async () => {
    for (const [schema, pointer] of [
      ['{"const":1e400}', "/schema/const"],
      ['{"type":"object","properties":{"n":{"enum":[1,-1e400]}}}', "/schema/properties/n/enum/1"],
      ['{"maximum":1E+999}', "/schema/maximum"],
    ] as const) {
      const type = name("huge");
      const before = await snapshot(app);
      const res = await app.api(`/signal-types/${type}`, {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: `{"auth":${JSON.stringify(AUTH)},"schema":${schema}}`,
      });
      const problem = await expectProblem(res, 422);
      expect(problem.validation_errors?.map((v) => v.path)).toEqual([pointer]);
      expect(await snapshot(app)).toEqual(before);
    }
  });
});
