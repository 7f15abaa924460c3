// JSON parsing hazards, all sent with a valid signature (the sender is authenticated, so every
// answer is recorded, but no wait moves and nothing 5xx). security.md §6: #42–#51.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { openWaitFor, post, putType, runSignals, signStandard, snapshot, swSecret, waitStatus } from "./support.ts";

const SW = swSecret(7);

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await putType(app, "any", { auth: { scheme: "standard-webhooks", secrets: [SW] }, schema: null, buffer_ttl_s: 3600 });
  await putType(app, "obj", { auth: { scheme: "standard-webhooks", secrets: [SW] }, schema: { type: "object" }, buffer_ttl_s: 3600 });
  await putType(app, "strict", {
    auth: { scheme: "standard-webhooks", secrets: [SW] },
    schema: { type: "object", properties: { name: { type: "string" } }, additionalProperties: false },
    buffer_ttl_s: 3600,
  });
  await putType(app, "amount", {
    auth: { scheme: "standard-webhooks", secrets: [SW] },
    schema: { type: "object", required: ["amount"], properties: { amount: { type: "number", minimum: 0 } } },
    buffer_ttl_s: 3600,
  });
  await putType(app, "bounded", { auth: { scheme: "standard-webhooks", secrets: [SW] }, schema: { type: "object", properties: { n: { type: "number", maximum: 100 } } }, buffer_ttl_s: 3600 });
  await putType(app, "num", { auth: { scheme: "standard-webhooks", secrets: [SW] }, schema: { type: "object", properties: { v: { type: "number" } } }, buffer_ttl_s: 3600 });
});
afterAll(async () => {
  await app?.close();
});

let n = 0;
const run = (p: string) => `${p}-${++n}`;
const signed = (r: string, type: string, body: string | Uint8Array) => post(app, r, type, body, signStandard(SW, body));

/** Sends with a wait open and asserts the status/outcome; the wait must stay waiting and nothing 5xx. */
async function refusedAuthenticated(type: string, body: string | Uint8Array, status: number, outcome: string) {
  const r = run(type);
  const waitId = await openWaitFor(app, r, type);
  const before = await snapshot(app);
  const a = await signed(r, type, body);
  expect(a.status, a.text.slice(0, 300)).toBe(status);
  expect(a.body).toMatchObject({ status, outcome });
  expect(await waitStatus(app, waitId)).toBe("waiting");
  const after = await snapshot(app);
  expect(after.waits).toEqual(before.waits);
  expect(after.events).toEqual(before.events);
  expect(after.runs).toEqual(before.runs);
  expect(after.signals).toBe(Number(before.signals) + 1); // the authenticated rejection is in the log
  return a;
}

describe("not JSON, or not UTF-8: 400 invalid_json", () => {
  const cases: Array<[string, string | Buffer]> = [
    ["truncated", '{"a":1'],
    ["trailing comma", '{"a":1,}'],
    ["single quotes", "{'a':1}"],
    ["a comment", '{"a":1 /* c */}'],
    ["NaN", '{"a":NaN}'],
    ["Infinity", '{"a":Infinity}'],
    ["garbage after the value", '{"a":1} x'],
    ["two values", '{"a":1}{"b":2}'],
    ["a raw control character in a string", '{"a":"x\u0001y"}'],
    ["a raw NUL byte in a string", '{"a":"x\u0000y"}'],
    ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d])],
    ["an overlong encoding", Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d])],
    ["a UTF-8 BOM", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":1}')])],
    ["UTF-16LE", Buffer.from('{"a":1}', "utf16le")],
    ["empty", ""],
    ["only whitespace", "  \n "],
  ];
  for (const [what, body] of cases) {
    it(what, async () => {
      await refusedAuthenticated("any", body, 400, "invalid_json");
    });
  }
});

describe("prototype keys are inert", () => {
  const bodies = ['{"__proto__":{"isAdmin":true}}', '{"constructor":{"prototype":{"isAdmin":true}}}', '{"\\u005f_proto__":{"isAdmin":true}}', '{"a":{"__proto__":{"polluted":1}}}'];

  it("accepted where the schema allows any object, stored as sent, and Object.prototype is untouched", async () => {
    for (const body of bodies) {
      const r = run("proto");
      const a = await signed(r, "any", body);
      expect(a.status, a.text).toBe(202);
      const [row] = await app.database.sql`select payload from signalbox.signals where run_id = ${r}`;
      expect(row!.payload).toBe(body);
      const { text } = await runSignals(app, r);
      expect(text).toMatch(/"(__proto__|constructor)":/); // listed back as an own key, as data
    }
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty("isAdmin");
  });

  it("refused (422) by a schema with additionalProperties: false, with the key as the pointer", async () => {
    const a = await refusedAuthenticated("strict", '{"__proto__":{"isAdmin":true}}', 422, "rejected_invalid_payload");
    expect(a.body.validation_errors).toEqual([{ path: "/__proto__", message: expect.any(String) }]);
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });

  it("a wait resolved with such a payload returns it as data, and the prototype stays clean", async () => {
    const r = run("proto-wait");
    const waitId = await openWaitFor(app, r, "any");
    expect((await signed(r, "any", '{"__proto__":{"isAdmin":true},"ok":1}')).status).toBe(202);
    const wait = (await (await app.api(`/waits/${waitId}`)).json()) as { result: { payload: Record<string, unknown> } };
    expect(wait.result.payload.ok).toBe(1);
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });
});

describe("hostile nesting: 422 with path \"\", no stack overflow, nothing 5xx", () => {
  for (const [what, body] of [
    ["10 000 nested arrays", "[".repeat(10_000) + "]".repeat(10_000)],
    ["200 000 nested arrays", "[".repeat(200_000) + "]".repeat(200_000)],
    ["100 000 nested objects", '{"a":'.repeat(100_000) + "1" + "}".repeat(100_000)],
    ["65 levels (one past the limit)", "[".repeat(65) + "]".repeat(65)],
  ] as const) {
    it(what, async () => {
      const a = await refusedAuthenticated("any", body, 422, "rejected_invalid_payload");
      expect(a.body.validation_errors).toEqual([{ path: "", message: expect.stringMatching(/deeper than 64/) }]);
    });
  }
  it("64 levels (the limit) is accepted", async () => {
    const a = await signed(run("deep-ok"), "any", "[".repeat(64) + "]".repeat(64));
    expect(a.status, a.text).toBe(202);
  });
  it("brackets inside strings do not count as nesting", async () => {
    const a = await signed(run("deep-str"), "any", JSON.stringify({ s: "[".repeat(10_000) + '\\"{' }));
    expect(a.status, a.text).toBe(202);
  });
});

describe("NUL and lone surrogates (valid JSON, unstorable in jsonb): 422, never 500", () => {
  const cases: Array<[string, string, string]> = [
    ["\\u0000 in a value", '{"a":"x\\u0000y"}', "/a"],
    ["a lone high surrogate", '{"a":"\\ud800"}', "/a"],
    ["a lone low surrogate", '{"a":"\\udc00"}', "/a"],
    ["a reversed pair", '{"a":"\\udc00\\ud800"}', "/a"],
    ["in an array", '{"a":["ok","\\ud800"]}', "/a/1"],
    ["\\u0000 in a key", '{"k\\u0000":1}', "/k\uFFFD"],
    ["a lone surrogate in a key", '{"k\\ud800":1}', "/k\uFFFD"],
    ["a top-level string", '"\\u0000"', ""],
  ];
  for (const [what, body, path] of cases) {
    it(what, async () => {
      const a = await refusedAuthenticated("any", body, 422, "rejected_invalid_payload");
      expect(a.body.validation_errors).toContainEqual({ path, message: expect.any(String) });
    });
  }
  it("a key with NUL that also breaks the schema (additionalProperties): 422 with a storable pointer", async () => {
    const a = await refusedAuthenticated("strict", '{"bad\\u0000key":1,"x\\udfff":2}', 422, "rejected_invalid_payload");
    for (const e of a.body.validation_errors as Array<{ path: string }>) {
      expect(e.path.includes("\u0000")).toBe(false);
      expect(e.path.isWellFormed()).toBe(true);
    }
  });
  it("a valid surrogate pair (an emoji written as escapes) is fine", async () => {
    const a = await signed(run("emoji"), "any", '{"a":"\\ud83d\\ude00"}');
    expect(a.status, a.text).toBe(202);
  });
});

describe("numbers keep their exact text", () => {
  it("1e400, -0, 2^53+1, a 400-digit integer, 1.0 and 0.1e1 are stored and listed digit for digit", async () => {
    const big = "9".repeat(400);
    const body = `{"inf":1e400,"negzero":-0,"unsafe":9007199254740993,"huge":${big},"one":1.0,"exp":0.1e1,"neg":-12345678901234567890}`;
    const r = run("nums");
    const a = await signed(r, "any", body);
    expect(a.status, a.text).toBe(202);
    const [row] = await app.database.sql`select payload from signalbox.signals where run_id = ${r}`;
    expect(row!.payload).toBe(body);
    const { text } = await runSignals(app, r);
    for (const literal of ["1e400", "-0", "9007199254740993", big, "1.0", "0.1e1", "-12345678901234567890"]) expect(text).toContain(literal);
    expect(text).not.toMatch(/"inf":null/);
    expect(text).not.toContain("9007199254740992");
  });
  it("against {type: number}: 1e400 (Infinity) is refused, 2^53+1 accepted (validated as a double, stored exactly)", async () => {
    await refusedAuthenticated("num", '{"v":1e400}', 422, "rejected_invalid_payload");
    const r = run("num-ok");
    expect((await signed(r, "num", '{"v":9007199254740993}')).status).toBe(202);
    expect((await runSignals(app, r)).text).toContain("9007199254740993");
  });
  it("against bounds: a number with more digits than a double keeps is refused, pointed at; exact ones pass", async () => {
    const refused = await refusedAuthenticated("bounded", '{"n":100.0000000000000000001}', 422, "rejected_invalid_payload");
    expect(refused.body.validation_errors).toEqual([{ path: "/n", message: expect.stringMatching(/more digits than can be checked exactly/) }]);
    await refusedAuthenticated("bounded", '{"n":9007199254740993}', 422, "rejected_invalid_payload");
    for (const exact of ["100", "100.0", "1e2", "99.99", "0.1"]) {
      expect((await signed(run("bounded-ok"), "bounded", `{"n":${exact}}`)).status, exact).toBe(202);
    }
    expect((await signed(run("bounded"), "bounded", '{"n":100.5}')).status).toBe(422); // the bound itself still holds
  });
});

describe("duplicate keys: the last one wins, in validation and when read back; the stored text is the bytes sent", () => {
  it('{"amount":1,"amount":-5} is refused (the -5 is what counts)', async () => {
    const a = await refusedAuthenticated("amount", '{"amount":1,"amount":-5}', 422, "rejected_invalid_payload");
    expect(a.body.validation_errors).toEqual([{ path: "/amount", message: expect.any(String) }]);
  });
  it('{"amount":-5,"amount":1} is accepted and reads back as amount 1', async () => {
    const r = run("dupkey");
    const waitId = await openWaitFor(app, r, "amount");
    const body = '{"amount":-5,"amount":1}';
    expect((await signed(r, "amount", body)).status).toBe(202);
    const [row] = await app.database.sql`select payload from signalbox.signals where run_id = ${r}`;
    expect(row!.payload).toBe(body);
    expect((await runSignals(app, r)).items[0]!.payload).toEqual({ amount: 1 });
    const wait = (await (await app.api(`/waits/${waitId}`)).json()) as { result: { payload: unknown } };
    expect(wait.result.payload).toEqual({ amount: 1 });
  });
});

describe("large but legal bodies stay fast", () => {
  it("60 000 small keys (under the 1 MiB cap) in under 3 s", async () => {
    const body = "{" + Array.from({ length: 60_000 }, (_, i) => `"k${i}":${i}`).join(",") + "}";
    expect(body.length).toBeLessThan(1024 * 1024);
    const started = Date.now();
    const a = await signed(run("keys"), "obj", body);
    expect(a.status, a.text.slice(0, 200)).toBe(202);
    expect(Date.now() - started).toBeLessThan(3000);
  });
  it("one 1 MB string (just under the cap) in under 3 s", async () => {
    const body = JSON.stringify({ s: "a".repeat(1024 * 1024 - 20) });
    const started = Date.now();
    const a = await signed(run("str"), "obj", body);
    expect(a.status, a.text.slice(0, 200)).toBe(202);
    expect(Date.now() - started).toBeLessThan(3000);
  });
  it("one byte over the cap: 413", async () => {
    const body = JSON.stringify({ s: "a".repeat(1024 * 1024) });
    const before = await snapshot(app);
    const a = await signed(run("over"), "obj", body);
    expect(a.status).toBe(413);
    expect(await snapshot(app)).toEqual(before);
  });
});

describe("a top-level value that is not the object the schema wants: 422 with path \"\"", () => {
  for (const body of ["[]", '"x"', "null", "42", "true"]) {
    it(body, async () => {
      const a = await refusedAuthenticated("obj", body, 422, "rejected_invalid_payload");
      expect(a.body.validation_errors).toEqual([{ path: "", message: expect.any(String) }]);
    });
  }
});
