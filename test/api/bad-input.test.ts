import net from "node:net";
// "Bad input gets a clear 4xx problem+json and changes nothing; no input produces a 5xx."
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { body, declareType, intake, openWait, rawRequest } from "../helpers/http.ts";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";

let app: TestApp;
let waitId: string;
let baseline: string;

beforeAll(async () => {
  app = await startTestApp();
  await declareType(app, "approval", {
    schema: { type: "object", properties: { approved: { type: "boolean" } } },
    auth: { scheme: "none" },
  });
  await declareType(app, "buffered", { auth: { scheme: "none" }, buffer_ttl_s: 60 });
  waitId = (await openWait(app, "existing-run", { signal: "approval", metadata: { assignee: "kim" }, timeout_s: 3600 })).body.id;
  await intake(app, "existing-run", "buffered", '{"kept":true}');
});
afterAll(async () => {
  await app.close();
});

/** Everything a user could see change: every list, the known run, its events, the victim runs. */
async function snapshot(): Promise<string> {
  const read = async (path: string) => {
    const res = await app.api(path);
    return `${path} ${res.status} ${(await res.text()).replace(/"request_id":"[^"]*"/, "")}`;
  };
  const parts = await Promise.all([
    read("/signal-types?limit=500"),
    read("/waits?limit=500"),
    read("/signals?limit=500"),
    read("/runs/existing-run"),
    read("/runs/existing-run/events?limit=500"),
    read(`/waits/${waitId}`),
    read("/runs/victim"),
    read("/runs/victim/waits"),
  ]);
  return parts.join("\n");
}

const short = (text: string) => (text.length > 80 ? `${text.slice(0, 60)}…(${text.length} chars)` : text);

/** Sends a request and asserts a 4xx problem+json; returns the problem. */
async function expectRefused(
  method: string,
  path: string,
  opts: { body?: string | Buffer; headers?: Record<string, string>; status?: number } = {},
) {
  const headers: Record<string, string> = { authorization: `Bearer ${API_KEY}`, ...(opts.body !== undefined ? { "content-type": "application/json" } : {}), ...opts.headers };
  const res = await rawRequest(app.baseUrl, { method, path, headers, body: opts.body });
  const where = `${method} ${path.slice(0, 120)} -> ${res.status} ${res.text.slice(0, 300)}`;
  expect(res.status, where).toBeGreaterThanOrEqual(400);
  expect(res.status, where).toBeLessThan(500);
  if (opts.status !== undefined) expect(res.status, where).toBe(opts.status);
  expect(String(res.headers["content-type"]), where).toMatch(/^application\/problem\+json/);
  const problem = JSON.parse(res.text) as { status: number; title: string; detail: string; type: string; validation_errors?: Array<{ path: string }> };
  expect(problem.status, where).toBe(res.status);
  expect(problem.detail, where).toEqual(expect.any(String));
  return problem;
}

const MANAGEMENT_WRITES: Array<[string, string]> = [
  ["PUT", "/signal-types/victim-type"],
  ["POST", "/runs/victim/waits"],
  ["POST", "/runs/victim/cancel"],
  ["POST", "/signals/batch"],
];

describe("bad input changes nothing", () => {
  // Each test compares what a user can see after its bad requests with what was there before.
  beforeEach(async () => {
    baseline = await snapshot();
  });

  describe("malformed JSON bodies on every management POST/PUT are 400", () => {
    for (const [method, path] of MANAGEMENT_WRITES) {
      it.each(["{", '{"signal":', "not json", "{'signal':'approval'}", '{"a":1}}', "\u0000", "[1,]"])(`${method} ${path}: %j`, async (text) => {
        await expectRefused(method, path, { body: text, status: 400 });
        expect(await snapshot()).toBe(baseline);
      });
    }
  });

  // Decoded leniently, the bad bytes were stored as U+FFFD: a body changed, silently (intake refuses them).
  describe("a management body that is not valid UTF-8 is 400, and changes nothing", () => {
    const valid: Record<string, string> = {
      "/signal-types/victim-type": '{"auth":{"scheme":"none"},"description":"X"}',
      "/runs/victim/waits": '{"signal":"approval","metadata":{"note":"X"}}',
      "/runs/victim/cancel": '{"reason":"X"}',
      "/signals/batch": '{"signals":[{"run_id":"victim","signal":"buffered","payload":{"note":"X"}}]}',
    };
    for (const [method, path] of MANAGEMENT_WRITES) {
      it(`${method} ${path}`, async () => {
        const json = Buffer.from(valid[path]!);
        const bad = Buffer.concat([json.subarray(0, json.indexOf("X")), Buffer.from([0xc3, 0x28]), json.subarray(json.indexOf("X") + 1)]);
        const problem = await expectRefused(method, path, { body: bad, status: 400 });
        expect(problem.detail).toContain("UTF-8");
        expect(await snapshot()).toBe(baseline);
      });
    }
  });

  // @hono/zod-openapi answers 415, which no operation documents, titled "Bad Request".
  describe("a management body not sent as JSON (text/plain, no content-type) is 400, saying to send JSON", () => {
    for (const [method, path] of MANAGEMENT_WRITES) {
      it.each([{ "content-type": "text/plain" }, { "content-type": "" }])(`${method} ${path}: %j`, async (headers) => {
        const problem = await expectRefused(method, path, { body: '{"auth":{"scheme":"none"},"signal":"approval"}', headers, status: 400 });
        expect(problem.detail).toContain("application/json");
        expect(await snapshot()).toBe(baseline);
      });
    }
  });

  describe("wrong types, unknown fields and bad values in management bodies are 400 naming the field", () => {
    const cases: Array<[string, string, unknown, string]> = [
      ["PUT", "/signal-types/victim-type", { auth: "none" }, "/auth"],
      ["PUT", "/signal-types/victim-type", { auth: { scheme: "none" }, description: 5 }, "/description"],
      ["PUT", "/signal-types/victim-type", { auth: { scheme: "none" }, buffer_ttl_s: 1.5 }, "/buffer_ttl_s"],
      ["PUT", "/signal-types/victim-type", { auth: { scheme: "none", tolerance_s: 0 } }, "/auth/tolerance_s"],
      ["PUT", "/signal-types/victim-type", { auth: { scheme: "none" }, responses: "approve" }, "/responses"],
      ["PUT", "/signal-types/victim-type", "just a string", ""],
      ["PUT", "/signal-types/victim-type", null, ""],
      ["POST", "/runs/victim/waits", {}, "/signal"],
      ["POST", "/runs/victim/waits", { signal: 5 }, "/signal"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_s: "10" }, "/timeout_s"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_s: -1 }, "/timeout_s"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_s: -0.001 }, "/timeout_s"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_s: 1e308 }, "/timeout_s"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_s: 10, timeout_at: "2030-01-01T00:00:00Z" }, "/timeout_at"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_at: "tomorrow" }, "/timeout_at"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_at: 1893456000 }, "/timeout_at"],
      ["POST", "/runs/victim/waits", { signal: "approval", callback_url: "ftp://engine/resume" }, "/callback_url"],
      ["POST", "/runs/victim/waits", { signal: "approval", callback_url: "javascript:alert(1)" }, "/callback_url"],
      ["POST", "/runs/victim/waits", { signal: "approval", callback_url: "file:///etc/passwd" }, "/callback_url"],
      ["POST", "/runs/victim/waits", { signal: "approval", callback_url: "not a url" }, "/callback_url"],
      ["POST", "/runs/victim/waits", { signal: "approval", callback_url: 8080 }, "/callback_url"],
      ["POST", "/runs/victim/waits", { signal: "approval", metadata: ["a"] }, "/metadata"],
      ["POST", "/runs/victim/waits", { signal: "approval", metadata: "kim" }, "/metadata"],
      ["POST", "/runs/victim/waits", { signal: "approval", metadata: { big: "x".repeat(17000) } }, "/metadata"],
      ["POST", "/runs/victim/waits", { signal: "approval", key: "" }, "/key"],
      ["POST", "/runs/victim/waits", { signal: "approval", key: 7 }, "/key"],
      ["POST", "/runs/victim/waits", { signal: "approval", unknown: true }, "/unknown"],
      ["POST", "/runs/victim/waits", { signal: "bad name!" }, "/signal"],
      ["POST", "/runs/victim/waits", [], ""],
      ["POST", "/runs/victim/cancel", { reason: 5 }, "/reason"],
      ["POST", "/runs/victim/cancel", { reason: "x", force: true }, "/force"],
      ["POST", "/runs/victim/cancel", { by: "x".repeat(201) }, "/by"],
      ["POST", "/signals/batch", {}, "/signals"],
      ["POST", "/signals/batch", { signals: [] }, "/signals"],
      ["POST", "/signals/batch", { signals: {} }, "/signals"],
      ["POST", "/signals/batch", { signals: [{ run_id: "victim", signal: "buffered", payload: {}, extra: 1 }] }, "/signals/0/extra"],
      ["POST", "/signals/batch", { signals: [{ run_id: "victim", signal: "buffered" }, { run_id: "a b", signal: "buffered" }] }, "/signals/1/run_id"],
      // A path's dot segments: no URL can name such a run (clients and servers resolve them away).
      ["POST", "/signals/batch", { signals: [{ run_id: ".", signal: "buffered" }] }, "/signals/0/run_id"],
      ["POST", "/signals/batch", { signals: [{ run_id: "..", signal: "buffered" }] }, "/signals/0/run_id"],
      ["POST", "/signals/batch", { signals: [{ run_id: "victim", signal: "-x" }] }, "/signals/0/signal"],
      ["POST", "/signals/batch", { signals: [{ run_id: "victim", signal: "buffered", idempotency_key: 5 }] }, "/signals/0/idempotency_key"],
      // The keys of approval links' and the console's answers: a sender holding one would make that answer a conflict.
      ["POST", "/signals/batch", { signals: [{ run_id: "victim", signal: "buffered", idempotency_key: "link:lk_taken" }] }, "/signals/0/idempotency_key"],
      ["POST", "/signals/batch", { signals: [{ run_id: "victim", signal: "buffered", idempotency_key: "console:wt_x:kim" }] }, "/signals/0/idempotency_key"],
      ["POST", "/signals/batch", { signals: Array.from({ length: 501 }, () => ({ run_id: "victim", signal: "buffered" })) }, "/signals"],
    ];
    for (const [method, path, json, pointer] of cases) {
      it(`${method} ${path} ${short(JSON.stringify(json))}`, async () => {
        const problem = await expectRefused(method, path, { body: JSON.stringify(json), status: 400 });
        expect(problem.validation_errors?.map((v) => v.path), problem.detail).toContain(pointer);
        expect(await snapshot()).toBe(baseline);
      });
    }

    it("lists every violation, not just the first", async () => {
      const problem = await expectRefused("POST", "/runs/victim/waits", {
        body: JSON.stringify({ signal: 5, timeout_s: -1, callback_url: "ftp://x", extra: 1 }),
        status: 400,
      });
      expect(problem.validation_errors!.map((v) => v.path)).toEqual(expect.arrayContaining(["/signal", "/timeout_s", "/callback_url", "/extra"]));
    });
  });

  describe("oversized management bodies are 413", () => {
    const big = JSON.stringify({ signal: "approval", metadata: { pad: "x".repeat(1024 * 1024 + 10) } });
    for (const [method, path] of MANAGEMENT_WRITES) {
      it(`${method} ${path}`, async () => {
        await expectRefused(method, path, { body: big, status: 413 });
        expect(await snapshot()).toBe(baseline);
      });
    }
    it("intake too", async () => {
      const problem = await expectRefused("POST", "/signals/victim/buffered", { body: big, status: 413 });
      expect(problem).toMatchObject({ outcome: "payload_too_large" });
    });
  });

  it("an Idempotency-Key longer than 200 characters, or an approval link's or the console's, is 400 problem+json at intake, and changes nothing", async () => {
    for (const key of ["k".repeat(201), "k".repeat(3000), "link:lk_taken", "console:wt_x:kim"]) {
      const problem = await expectRefused("POST", "/signals/victim/buffered", { body: "{}", headers: { "idempotency-key": key }, status: 400 });
      expect(JSON.stringify(problem)).toMatch(/idempotency-key/);
    }
    expect(await snapshot()).toBe(baseline);
  });

  describe("invalid run ids and signal names in paths are 4xx", () => {
    const badRuns = ["r".repeat(201), "%20", "a%20b", "..", ".", "%2E%2E", "a%2Fb", "%00", "caf%C3%A9", "a%3Fb", "%", "%ZZ", "a+b", "a,b", "a'b"];
    const routes = (run: string): Array<[string, string, string?]> => [
      ["POST", `/runs/${run}/waits`, JSON.stringify({ signal: "approval" })],
      ["GET", `/runs/${run}`],
      ["POST", `/runs/${run}/cancel`, "{}"],
      ["GET", `/runs/${run}/waits`],
      ["GET", `/runs/${run}/events`],
      ["GET", `/runs/${run}/signals`],
      ["POST", `/signals/${run}/buffered`, "{}"],
    ];
    for (const run of badRuns) {
      it(`run id ${short(run)}`, async () => {
        for (const [method, path, text] of routes(run)) await expectRefused(method, path, { body: text });
        expect(await snapshot()).toBe(baseline);
      });
    }

    it("run id `..` is not resolved against the path (/runs/../waits is not /waits)", async () => {
      const res = await rawRequest(app.baseUrl, { method: "GET", path: "/runs/../waits", headers: { authorization: `Bearer ${API_KEY}` } });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    });

    const badNames = ["-x", ".x", "_x", "a%20b", "x".repeat(101), "a%2Fb", "%00", "caf%C3%A9", "a:b", "a@b"];
    for (const name of badNames) {
      it(`signal name ${short(name)}`, async () => {
        await expectRefused("PUT", `/signal-types/${name}`, { body: JSON.stringify({ auth: { scheme: "none" } }) });
        await expectRefused("GET", `/signal-types/${name}`);
        await expectRefused("DELETE", `/signal-types/${name}`);
        await expectRefused("POST", `/signals/victim/${name}`, { body: "{}" });
        await expectRefused("GET", `/waits?signal=${name}`);
        expect(await snapshot()).toBe(baseline);
      });
    }

    it("a bad wait id is 4xx", async () => {
      for (const id of ["x".repeat(101), "%00", "wt_%00"]) {
        await expectRefused("GET", `/waits/${id}`);
        await expectRefused("POST", `/waits/${id}/cancel`);
        await expectRefused("POST", `/waits/${id}/redeliver`);
      }
      expect(await snapshot()).toBe(baseline);
    });
  });

  describe("missing or bad Authorization is 401 with WWW-Authenticate, the same body on every route", () => {
    const routes: Array<[string, string, string?]> = [
      ["GET", "/signal-types"],
      ["PUT", "/signal-types/victim-type", JSON.stringify({ auth: { scheme: "none" } })],
      ["DELETE", "/signal-types/approval"],
      ["POST", "/runs/victim/waits", JSON.stringify({ signal: "approval" })],
      ["GET", `/waits/${"wt_x"}`],
      ["POST", `/waits/${"wt_x"}/cancel`],
      ["GET", "/waits?status=waiting"],
      ["POST", "/runs/victim/cancel", "{}"],
      ["GET", "/runs/existing-run"],
      ["GET", "/runs/existing-run/events"],
      ["GET", "/signals"],
      ["POST", "/signals/batch", JSON.stringify({ signals: [{ run_id: "victim", signal: "buffered" }] })],
      ["GET", "/no-such-route"],
    ];
    const credentials: Array<Record<string, string>> = [
      {},
      { authorization: "" },
      { authorization: "Bearer" },
      { authorization: "Bearer " },
      { authorization: "Bearer wrong-key" },
      { authorization: `Bearer ${API_KEY}x` },
      { authorization: `Basic ${Buffer.from(`user:${API_KEY}`).toString("base64")}` },
      { authorization: API_KEY },
      { authorization: `Bearer ${API_KEY} ${API_KEY}` },
      { authorization: "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0." },
    ];
    it("for every route and every bad credential", async () => {
      const bodies = new Set<string>();
      for (const [method, path, text] of routes) {
        for (const creds of credentials) {
          const res = await rawRequest(app.baseUrl, {
            method,
            path,
            headers: { ...(text ? { "content-type": "application/json" } : {}), ...creds },
            body: text,
          });
          const where = `${method} ${path} ${JSON.stringify(creds)}`;
          expect(res.status, where).toBe(401);
          expect(String(res.headers["content-type"]), where).toMatch(/^application\/problem\+json/);
          expect(String(res.headers["www-authenticate"]), where).toMatch(/^Bearer/);
          const { request_id: _id, ...problem } = JSON.parse(res.text);
          bodies.add(JSON.stringify(problem));
        }
      }
      expect([...bodies]).toHaveLength(1);
      expect(JSON.parse([...bodies][0]!)).toMatchObject({ status: 401, title: expect.any(String), detail: expect.any(String) });
      expect(await snapshot()).toBe(baseline);
    });

    it("the public routes need no token", async () => {
      for (const path of ["/healthz", "/readyz", "/openapi.json"]) {
        expect((await fetch(app.baseUrl + path)).status, path).toBe(200);
      }
    });
  });

  describe("hostile values that the database cannot store are refused, not a 500", () => {
    const cases: Array<[string, string, unknown, string]> = [
      ["POST", "/runs/victim/waits", { signal: "approval", metadata: { note: "nul \u0000 here" } }, "/metadata/note"],
      ["POST", "/runs/victim/waits", { signal: "approval", metadata: { "k\u0000": "v" } }, "/metadata/k\uFFFD"],
      ["POST", "/runs/victim/waits", { signal: "approval", key: "step\u0000" }, "/key"],
      ["POST", "/runs/victim/waits", { signal: "approval", callback_url: "http://engine/\u0000" }, "/callback_url"],
      ["POST", "/runs/victim/cancel", { reason: "why\u0000" }, "/reason"],
      ["POST", "/runs/victim/cancel", { by: "\u0000" }, "/by"],
      ["POST", "/signals/batch", { signals: [{ run_id: "victim", signal: "buffered", payload: { a: ["\u0000"] } }] }, "/signals/0/payload/a/0"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_at: "0000-01-01T00:00:00Z" }, "/timeout_at"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_at: "0001-01-01T00:30:00+01:00" }, "/timeout_at"],
      ["POST", "/runs/victim/waits", { signal: "approval", timeout_at: "9999-12-31T23:59:60Z" }, "/timeout_at"],
    ];
    for (const [method, path, json, pointer] of cases) {
      it(`${method} ${path} ${JSON.stringify(json)}`, async () => {
        const problem = await expectRefused(method, path, { body: JSON.stringify(json), status: 400 });
        expect(problem.validation_errors?.map((v) => v.path), problem.detail).toContain(pointer);
        expect(await snapshot()).toBe(baseline);
      });
    }

    it.each([
      ["lone surrogate in metadata", '{"signal":"approval","metadata":{"a":"\\ud800"}}'],
      ["lone surrogate in a metadata key", '{"signal":"approval","metadata":{"\\udc00":"a"}}'],
      ["lone surrogate in key", '{"signal":"approval","key":"\\ud83d"}'],
      ["lone surrogate in the cancel reason", '{"reason":"\\ud800"}'],
    ])("%s", async (_label, text) => {
      const path = text.includes("reason") ? "/runs/victim/cancel" : "/runs/victim/waits";
      await expectRefused("POST", path, { body: text });
      expect(await snapshot()).toBe(baseline);
    });

    it.each([
      "/waits?metadata.assignee=%00",
      "/waits?metadata.%00=x",
      "/waits?deadline_before=0000-01-01T00:00:00Z",
      "/waits?created_before=0000-01-01T00:00:00Z",
      `/waits?cursor=${Buffer.from('["2024-01-01T00:00:00.000Z","wt_\\u0000"]').toString("base64url")}`,
      `/waits?cursor=${Buffer.from('["+275760-09-13T00:00:00.000Z","wt_x"]').toString("base64url")}`,
      `/waits?cursor=${Buffer.from('["-271821-04-20T00:00:00.000Z","wt_x"]').toString("base64url")}`,
      `/signals?cursor=${Buffer.from('["0000-01-01T00:00:00.000Z","sg_x"]').toString("base64url")}`,
      `/signal-types?cursor=${Buffer.from("a\u0000").toString("base64url")}`,
    ])("GET %s", async (path) => {
      await expectRefused("GET", path);
    });

    it("a query value that is not UTF-8 is no 5xx", async () => {
      const res = await rawRequest(app.baseUrl, { method: "GET", path: "/waits?metadata.a=%ED%A0%80&signal=approval", headers: { authorization: `Bearer ${API_KEY}` } });
      expect(res.status).toBeLessThan(500);
    });

    it("deeply nested JSON in management bodies", async () => {
      const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
      for (const n of [1000, 100_000]) {
        await expectRefused("POST", "/runs/victim/waits", { body: `{"signal":"approval","metadata":{"a":${deep(n)}}}` });
        await expectRefused("PUT", "/signal-types/victim-type", { body: `{"auth":{"scheme":"none"},"schema":{"a":${deep(n)}}}` });
        await expectRefused("POST", "/signals/batch", { body: `{"signals":[{"run_id":"victim","signal":"buffered","payload":${deep(n)}}]}` });
      }
      expect(await snapshot()).toBe(baseline);
    });

    it("deeply nested JSON at intake is rejected_invalid_payload", async () => {
      const deep = "[".repeat(100_000) + "]".repeat(100_000);
      const problem = await expectRefused("POST", "/signals/victim/buffered", { body: deep, status: 422 });
      expect(problem).toMatchObject({ outcome: "rejected_invalid_payload" });
    });
  });
});

describe("bad queries are 400 (reads: nothing to change)", () => {
  describe("bad query values are 400", () => {
    const lists = ["/waits", "/runs/existing-run/waits", "/signals", "/runs/existing-run/signals", "/signal-types", "/runs/existing-run/events"];
    for (const list of lists) {
      it.each(["limit=0", "limit=501", "limit=abc", "limit=-1", "limit=1.5", "limit=", "limit=1e9"])(`${list}?%s`, async (q) => {
        await expectRefused("GET", `${list}?${q}`, { status: 400 });
      });
    }
    it.each([
      "/waits?status=bogus",
      "/waits?status=WAITING",
      "/runs/existing-run/waits?status=bogus",
      "/signals?outcome=bogus",
      "/waits?deadline_before=yesterday",
      "/waits?created_before=2024-02-30",
      "/waits?run_id=a%20b",
      `/waits/${"wt_x"}?wait_s=abc`,
      `/waits/${"wt_x"}?wait_s=61`,
      "/waits?metadata.=x",
      "/waits?metadata.assignee=kim&metadata.assignee=lee",
      `/waits?metadata.${"k".repeat(101)}=x`,
    ])("%s", async (path) => {
      await expectRefused("GET", path, { status: 400 });
    });
  });

  describe("garbage cursors are 400", () => {
    const b64 = (v: string) => Buffer.from(v).toString("base64url");
    const cursors = [
      "!!!",
      "%00",
      "a".repeat(401),
      b64("junk"),
      b64("{}"),
      b64("[]"),
      b64('["a"]'),
      b64("[1,2]"),
      b64('["not a date","wt_x"]'),
      b64('["2024-13-45T00:00:00.000Z","wt_x"]'),
      b64('["2024-01-01T00:00:00.000Z",null]'),
      b64('["2024-01-01T00:00:00.000Z","wt_x","extra"]'),
    ];
    const lists = ["/waits", "/runs/existing-run/waits", "/signals", "/runs/existing-run/signals", "/signal-types"];
    for (const list of lists) {
      for (const cursor of cursors) {
        // A signal-type cursor is the last name served: base64 of "junk" is a fine position.
        if (list === "/signal-types" && cursor === b64("junk")) continue;
        it(`${list}?cursor=${short(cursor)}`, async () => {
          await expectRefused("GET", `${list}?cursor=${cursor}`, { status: 400 });
        });
      }
    }
  });
});

describe("no input produces a 5xx", () => {
  /** A small deterministic PRNG (mulberry32), so a failure can be replayed. */
  function prng(seed: number) {
    return () => {
      seed |= 0;
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }

  const SCALARS: unknown[] = [
    null, true, false, 0, -1, 1.5, -0, 1e308, -1e308, 2 ** 53 + 1, "", " ", "approval", "\u0000", "\ud800", "\udc00x", "💥",
    "x".repeat(300), "../../etc/passwd", "<script>alert(1)</script>", "'; drop table signalbox.waits; --", "%00", "\\", "http://127.0.0.1:1/x",
    "2024-01-01T00:00:00Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "NaN", "Infinity", "__proto__", "constructor",
  ];
  const KEYS = ["signal", "key", "timeout_s", "timeout_at", "callback_url", "metadata", "auth", "scheme", "secrets", "schema", "buffer_ttl_s",
    "responses", "description", "reason", "by", "signals", "run_id", "payload", "idempotency_key", "__proto__", "constructor", "prototype", "\u0000", "", "type", "$ref", "pattern"];


  function randomValue(rnd: () => number, depth: number): unknown {
    const pick = <T,>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)]!;
    const r = rnd();
    if (depth > 4 || r < 0.45) return pick(SCALARS);
    if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 4) }, () => randomValue(rnd, depth + 1));
    const obj: Record<string, unknown> = {};
    for (let i = Math.floor(rnd() * 5); i > 0; i--) obj[pick(KEYS)] = randomValue(rnd, depth + 1);
    return obj;
  }

  /** A plausible body with one or two fields mangled, or outright garbage. */
  function randomBody(rnd: () => number, route: string): string {
    const r = rnd();
    if (r < 0.1) return Buffer.from(Array.from({ length: Math.floor(rnd() * 64) }, () => Math.floor(rnd() * 256))).toString("latin1");
    if (r < 0.15) return "[".repeat(Math.floor(rnd() * 5000)) + "]".repeat(Math.floor(rnd() * 5000));
    if (r < 0.3) return JSON.stringify(randomValue(rnd, 0));
    const base: Record<string, unknown> =
      route === "waits"
        ? { signal: "approval", key: "k", timeout_s: 10, callback_url: "http://127.0.0.1:1/resume", metadata: { a: "b" } }
        : route === "types"
          ? { description: "d", schema: { type: "object" }, auth: { scheme: "none" }, buffer_ttl_s: 0, responses: ["ok"] }
          : route === "batch"
            ? { signals: [{ run_id: "fuzz", signal: "buffered", payload: { a: 1 }, idempotency_key: "k" }] }
            : route === "cancel"
              ? { reason: "r", by: "b" }
              : { approved: true };
    const target = route === "batch" ? ((base.signals as Array<Record<string, unknown>>)[0] as Record<string, unknown>) : base;
    for (let i = 1 + Math.floor(rnd() * 2); i > 0; i--) {
      const own = Object.keys(target);
      const key = rnd() < 0.8 && own.length > 0 ? own[Math.floor(rnd() * own.length)]! : KEYS[Math.floor(rnd() * KEYS.length)]!;
      target[key] = randomValue(rnd, 1);
    }
    return JSON.stringify(target);
  }

  it("200 random and hostile bodies against intake and management routes", async () => {
    const rnd = prng(20240611);
    const routes: Array<[string, () => string, string]> = [
      ["POST", () => "/signals/fuzz/approval", "intake"],
      ["POST", () => "/signals/fuzz/buffered", "intake"],
      ["POST", () => "/runs/fuzz/waits", "waits"],
      ["PUT", () => `/signal-types/fuzz-${Math.floor(rnd() * 5)}`, "types"],
      ["POST", () => "/signals/batch", "batch"],
      ["POST", () => "/runs/fuzz-cancel/cancel", "cancel"],
    ];
    const failures: string[] = [];
    for (let i = 0; i < 200; i++) {
      const [method, path, kind] = routes[i % routes.length]!;
      const p = path();
      const text = randomBody(rnd, kind);
      const auth: Record<string, string> = rnd() < 0.9 ? { authorization: `Bearer ${API_KEY}` } : {};
      const res = await rawRequest(app.baseUrl, { method, path: p, headers: { "content-type": "application/json", ...auth }, body: text });
      if (res.status >= 500) failures.push(`#${i} ${method} ${p} ${JSON.stringify(text.slice(0, 200))} -> ${res.status} ${res.text.slice(0, 200)}`);
      else if (res.status >= 400) expect(String(res.headers["content-type"]), `#${i} ${p}`).toMatch(/^application\/problem\+json/);
    }
    expect(failures).toEqual([]);
    // The service is still fine afterwards.
    expect((await fetch(`${app.baseUrl}/readyz`)).status).toBe(200);
    expect((await body(app.api("/runs/existing-run"))).open_waits).toBe(1);
  });

  // Refused by @hono/node-server before the app sees them: it answered a bare 400 with no body.
  it("a request whose Host header or target makes no URL is 400 problem+json", async () => {
    for (const [target, host] of [["/healthz", "a b"], ["/healthz", "["], ["/\\evil/x", "localhost"], ["/readyz", "x:99999"]]) {
      const head = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(new URL(app.baseUrl).port as unknown as number, "127.0.0.1", () => socket.end(`GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`));
        let got = "";
        socket.on("data", (d) => (got += d.toString("latin1"))).on("end", () => resolve(got)).on("error", reject);
      });
      const where = `GET ${target} (Host: ${host}) -> ${head.slice(0, 200)}`;
      expect(head.split("\r\n")[0], where).toMatch(/^HTTP\/1\.1 4\d\d /);
      expect(head, where).toMatch(/\r\ncontent-type: application\/problem\+json/i);
    }
  });

  it("random query strings and paths", async () => {
    const rnd = prng(7);
    const pieces = ["limit", "cursor", "status", "signal", "metadata.", "metadata.a", "deadline_before", "created_before", "wait_s", "after", "outcome", "run_id"];
    const values = ["", "0", "-1", "abc", "%00", "%ff", "%", "!!!", "1e3", "waiting", "2024-01-01T00:00:00Z", "0000-01-01T00:00:00Z", "ev_1", "a".repeat(500)];
    const lists = ["/waits", "/waits/wt_x", "/runs/fuzz/waits", "/runs/fuzz/events", "/runs/fuzz/signals", "/signals", "/signal-types", "/runs/fuzz"];
    const failures: string[] = [];
    for (let i = 0; i < 100; i++) {
      const q = Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => `${pieces[Math.floor(rnd() * pieces.length)]}=${values[Math.floor(rnd() * values.length)]}`).join("&");
      const path = `${lists[i % lists.length]}?${q}`;
      const res = await rawRequest(app.baseUrl, { method: "GET", path, headers: { authorization: `Bearer ${API_KEY}` } });
      if (res.status >= 500) failures.push(`GET ${path} -> ${res.status} ${res.text.slice(0, 200)}`);
    }
    expect(failures).toEqual([]);
  });
});
