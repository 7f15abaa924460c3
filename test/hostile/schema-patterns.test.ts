import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkSchema, validatePayload } from "../../src/signal-types/payload-schema.ts";
import { killServices, onDatabase, startService, type ServiceProcess } from "../helpers/service-process.ts";
import { whileProbingHealth } from "../helpers/probes.ts";
import { createTestDatabase } from "../helpers/test-app.ts";

// A schema's `pattern` is run against every signal's strings. Run by a backtracking engine, a
// pattern as plain as ^\w+\s?\w+$ takes seconds on one long string (polynomial backtracking),
// freezing the server for everyone. Patterns run in linear time instead, and what a linear-time
// engine cannot run (backreferences, lookarounds) is refused when the type is declared.

let db: { url: string; drop(): Promise<void> };
let svc: ServiceProcess;
beforeAll(async () => {
  db = await createTestDatabase();
  svc = await startService(onDatabase(db.url));
});
afterAll(async () => {
  killServices();
  await db?.drop();
});

let n = 0;
async function put(schema: unknown) {
  const type = `patterns-${++n}`;
  const res = await svc.api(`/signal-types/${type}`, { method: "PUT", json: { auth: { scheme: "none" }, schema, buffer_ttl_s: 600 } });
  return { type, status: res.status, body: (await res.json()) as { validation_errors?: Array<{ path: string; message: string }> } };
}

/** POSTs `body` to the type; answers the status and how long it took. */
async function send(type: string, body: string) {
  const started = Date.now();
  const res = await fetch(`${svc.baseUrl}/signals/run-1/${type}`, { method: "POST", headers: { "content-type": "application/json" }, body, signal: AbortSignal.timeout(60_000) });
  await res.arrayBuffer();
  return { status: res.status, ms: Date.now() - started };
}

describe("a pattern that backtracks polynomially, against a long string", () => {
  const cases = [
    { pattern: "^\\w+\\s?\\w+$", value: "a".repeat(150_000) + "!" }, // 19 s when backtracking
    { pattern: "^[a-z]+[a-z]+[a-z]+@", value: "a".repeat(150_000) }, // 39 s at 5 000 characters
  ];
  for (const { pattern, value } of cases) {
    it(`${pattern}: the signal is answered 422 at once and /healthz stays responsive`, async () => {
      const declared = await put({ type: "object", properties: { name: { type: "string", pattern } } });
      expect(declared.status, JSON.stringify(declared.body)).toBe(201);
      const { result, slowestHealthz } = await whileProbingHealth(svc.baseUrl, () => send(declared.type, JSON.stringify({ name: value })));
      expect(result.status).toBe(422);
      expect(result.ms).toBeLessThan(1000);
      expect(slowestHealthz).toBeLessThan(1000);
      expect(svc.alive()).toBe(true);
    });
  }

  it("as a patternProperties key (matched against every property name)", async () => {
    const declared = await put({ type: "object", patternProperties: { "^\\w+\\s?\\w+$": { type: "string" } }, additionalProperties: false });
    expect(declared.status, JSON.stringify(declared.body)).toBe(201);
    const { result, slowestHealthz } = await whileProbingHealth(svc.baseUrl, () => send(declared.type, JSON.stringify({ ["a".repeat(150_000) + "!"]: "x" })));
    expect(result.status).toBe(422);
    expect(result.ms).toBeLessThan(1000);
    expect(slowestHealthz).toBeLessThan(1000);
  });
});

describe("a patternProperties key that also matches a declared property name", () => {
  it("is accepted at once: the key is not tried against the names with a backtracking engine at PUT", async () => {
    // ajv's strict check tried each key against each name with V8 (39 s for these 5 000 characters).
    const schema = { type: "object", properties: { ["a".repeat(5000)]: { type: "string" } }, patternProperties: { "^[a-z]+[a-z]+[a-z]+@": { type: "string" } } };
    const { result, slowestHealthz } = await whileProbingHealth(svc.baseUrl, async () => {
      const started = Date.now();
      return { ...(await put(schema)), ms: Date.now() - started };
    });
    expect(result.status, JSON.stringify(result.body)).toBe(201);
    expect(result.ms).toBeLessThan(1000);
    expect(slowestHealthz).toBeLessThan(1000);
  });

  it("and a property matching both is checked against both", async () => {
    const declared = await put({ type: "object", properties: { code: { type: "string" } }, patternProperties: { "^c": { minLength: 2 } } });
    expect(declared.status, JSON.stringify(declared.body)).toBe(201);
    expect((await send(declared.type, '{"code":"ab"}')).status).toBe(202);
    expect((await send(declared.type, '{"code":"a"}')).status).toBe(422);
    expect((await send(declared.type, '{"code":1}')).status).toBe(422);
  });
});

describe("patterns a linear-time engine cannot run are refused at PUT", () => {
  const refused = {
    "^(a)\\1$": /backreference/,
    "^(?<x>a)\\k<x>$": /backreference/,
    "^(?=.*\\d)\\w+$": /lookahead|lookbehind/,
    "^(?!admin)\\w+$": /lookahead|lookbehind/,
    "(?<=\\$)\\d+": /lookahead|lookbehind/,
    "(?<!-)\\d+": /lookahead|lookbehind/,
    "^a{1001}$": /linear-time/, // RE2 repeats at most 1000 times
    // Linear, but times the program's size: 2.3 s per MiB at 200 instructions, 11 s at 1000.
    "[ab]*a[ab]{999}$": /too complex/,
  };
  for (const [pattern, message] of Object.entries(refused)) {
    it(`${pattern}: 422 with a clear message`, async () => {
      const declared = await put({ type: "object", properties: { s: { type: "string", pattern } } });
      expect(declared.status, JSON.stringify(declared.body)).toBe(422);
      expect(declared.body.validation_errors).toEqual([{ path: "/schema/properties/s/pattern", message: expect.stringMatching(message) }]);
    });
  }

  it("in patternProperties too", async () => {
    const declared = await put({ type: "object", patternProperties: { "^(a)\\1$": {} } });
    expect(declared.status).toBe(422);
    expect(declared.body.validation_errors).toEqual([{ path: "/schema/patternProperties/^(a)\\1$", message: expect.stringMatching(/backreference/) }]);
  });
});

describe("patterns keep ECMAScript's meaning (with the u flag)", () => {
  // Each pattern against each string must match exactly as new RegExp(pattern, "u") does.
  const patterns = [
    "^.$", "^..$", "^\\s+$", "^\\S+$", "^[\\s]+$", "^[^\\s]+$", "^[\\S]+$", "^[^\\S]$", "^\\w+$", "^\\W$", "^[\\w-]+$", "\\bcat\\b", "^\\d{2,4}$",
    "^[a-z]+(-[a-z]+)?$", "^\\p{Lu}\\p{Ll}+$", "^\\p{Script=Greek}+$", "^\\p{sc=Latin}+$", "^\\p{gc=Nd}$", "^\\P{L}$", "^\\u00e9$", "^\\u{1F600}$",
    "^\\ud83d\\ude00$", "^\\x41$", "^\\cJ$", "^\\0$", "^[\\b]$", "^\\/$", "^[[]$", "^[[:a]+$", "^[]$", "^[^]$", "^(?<word>\\w+)$", "a$", "^a",
    "^\\t\\n\\v\\f\\r$", "^[\\-a]$", "^\\.$", "^a|b$", "^(?:ab)+?$", "^[^a-c]$", "^\\$\\^\\(\\)\\[\\]\\{\\}\\|\\\\\\*\\+\\?$", "é", "^😀+$",
  ];
  const strings = [
    "", "a", "ab", "é", "e\u0301", "😀", "😀😀", "\n", "\r", "\u2028", "\u00a0", "\ufeff", "\u3000", "\t\n\u000b\f\r", " ", "\u0085", "\u180e",
    "A", "Ab", "Ωμέγα", "αβγ", "abc", "abc-def", "abc--def", "-", "5", "٣", "12", "123456", "a cat sat", "concat", "/", "[", "a:", "alpha", "\b", "\0",
    "\u000a", "b", "ba", "ab\n", "\nab", "$^()[]{}|\\*+?", ".", "x", "a b", "\ud800", "word_1",
  ];

  it("matches exactly as new RegExp(pattern, 'u') for a table of patterns and strings", () => {
    const mismatches: string[] = [];
    for (const pattern of patterns) {
      const schema = { type: "string", pattern };
      expect(checkSchema(schema), pattern).toEqual([]);
      const native = new RegExp(pattern, "u");
      for (const s of strings) {
        const accepted = validatePayload(schema, s, JSON.stringify(s)).length === 0;
        if (accepted !== native.test(s)) mismatches.push(`${pattern} on ${JSON.stringify(s)}: native ${native.test(s)}`);
      }
    }
    expect(mismatches).toEqual([]);
  });

  it("a schema stored before these checks, with a backreference, still validates as it did (on V8)", () => {
    const stored = { type: "string", pattern: "^(a)\\1$" };
    expect(validatePayload(stored, "aa", '"aa"')).toEqual([]);
    expect(validatePayload(stored, "ab", '"ab"')).toEqual([{ path: "", message: expect.stringMatching(/pattern/) }]);
  });

  it("an invalid ECMAScript pattern is refused even where RE2 would accept it: (?i)a, \\Aa, a{,3}, \\pL, [[:alpha:]]", () => {
    for (const pattern of ["(?i)a", "\\Aa", "a{,3}", "\\pL", "^[[:alpha:]]+$"]) {
      expect(checkSchema({ type: "string", pattern }), pattern).toEqual([{ path: "/schema/pattern", message: expect.any(String) }]);
    }
  });
});
