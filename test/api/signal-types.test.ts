import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSignalTypesFile } from "../../src/signal-types/load-signal-types-file.ts";
import { body, expectProblem, intake, openWait, readAll } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
});

const put = (name: string, json: unknown) => app.api(`/signal-types/${name}`, { method: "PUT", json });

const APPROVAL = {
  description: "Manager approves the order",
  schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" } } },
  auth: { scheme: "none" },
  buffer_ttl_s: 0,
  responses: null,
};

describe("PUT /signal-types/{name}", () => {
  it("creates with 201, then replaces with 200, and GET shows the replacement", async () => {
    const created = await put("order-approval", APPROVAL);
    expect(created.status).toBe(201);
    const first = await body(created);
    expect(first).toMatchObject({
      name: "order-approval",
      description: "Manager approves the order",
      schema: APPROVAL.schema,
      auth: { scheme: "none", secret_count: 0, tolerance_s: 300 },
      buffer_ttl_s: 0,
      responses: null,
    });
    expect(Date.parse(first.created_at)).not.toBeNaN();

    const replaced = await put("order-approval", { description: "Replaced", auth: { scheme: "none" }, buffer_ttl_s: 60 });
    expect(replaced.status).toBe(200);
    const second = await body(replaced);
    expect(second).toMatchObject({ name: "order-approval", description: "Replaced", schema: null, buffer_ttl_s: 60, responses: null });
    expect(second.created_at).toBe(first.created_at);
    expect(Date.parse(second.updated_at)).toBeGreaterThanOrEqual(Date.parse(first.updated_at));

    const got = await app.api("/signal-types/order-approval");
    expect(got.status).toBe(200);
    expect(await got.json()).toEqual(second);
  });

  it("the replacement governs intake at once (the old schema no longer applies)", async () => {
    expect((await put("swap-schema", { schema: { type: "object", required: ["a"] }, auth: { scheme: "none" } })).status).toBe(201);
    expect((await openWait(app, "swap-run", { signal: "swap-schema" })).status).toBe(201);
    expect((await intake(app, "swap-run", "swap-schema", "{}")).status).toBe(422);
    expect((await put("swap-schema", { schema: null, auth: { scheme: "none" } })).status).toBe(200);
    expect((await intake(app, "swap-run", "swap-schema", "{}")).status).toBe(202);
  });

  it("keeps the allowed `responses` and enforces them on the payload's `response` field", async () => {
    const res = await put("decision", { auth: { scheme: "none" }, responses: ["approve", "reject"] });
    expect(res.status).toBe(201);
    expect((await body(res)).responses).toEqual(["approve", "reject"]);
    expect((await body(app.api("/signal-types/decision"))).responses).toEqual(["approve", "reject"]);

    expect((await openWait(app, "decision-run", { signal: "decision" })).status).toBe(201);
    const bad = await intake(app, "decision-run", "decision", JSON.stringify({ response: "maybe" }));
    expect(bad.status).toBe(422);
    expect(bad.body!.validation_errors).toContainEqual(expect.objectContaining({ path: "/response" }));
    const good = await intake(app, "decision-run", "decision", JSON.stringify({ response: "approve" }));
    expect(good.status).toBe(202);
  });

  it("rejects an empty `responses` list with 400", async () => {
    await expectProblem(await put("decision-empty", { auth: { scheme: "none" }, responses: [] }), 400);
    await expectProblem(await app.api("/signal-types/decision-empty"), 404);
  });
});

describe("secrets are write-only", () => {
  const SECRET_SW = "whsec_c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1sZWFr";
  const SECRET_GH = "gh-topsecret-value-123";
  const SECRET_ROTATED = "gh-rotated-secret-456";

  it("no response shows a secret, only secret_count", async () => {
    const texts: string[] = [];
    const a = await put("secret-sw", { auth: { scheme: "standard-webhooks", secrets: [SECRET_SW], tolerance_s: 120 } });
    expect(a.status).toBe(201);
    texts.push(await a.text());
    const b = await put("secret-gh", { auth: { scheme: "github", secrets: [SECRET_GH, SECRET_ROTATED], replay_across_runs: true } });
    expect(b.status).toBe(201);
    texts.push(await b.text());
    const again = await put("secret-gh", { auth: { scheme: "github", secrets: [SECRET_GH, SECRET_ROTATED], replay_across_runs: true } });
    expect(again.status).toBe(200);
    texts.push(await again.text());

    const getA = await app.api("/signal-types/secret-sw");
    const getB = await app.api("/signal-types/secret-gh");
    const list = await app.api("/signal-types?limit=500");
    for (const r of [getA, getB, list]) texts.push(await r.text());

    for (const t of texts) {
      for (const s of [SECRET_SW, SECRET_SW.slice(6), SECRET_GH, SECRET_ROTATED]) expect(t).not.toContain(s);
      expect(t).not.toContain('"secrets"');
    }
    expect(JSON.parse(texts[3]!).auth).toEqual({ scheme: "standard-webhooks", secret_count: 1, tolerance_s: 120 });
    expect(JSON.parse(texts[4]!).auth).toMatchObject({ scheme: "github", secret_count: 2 });
  });
});

describe("GET /signal-types", () => {
  it("lists by name and paginates with limit=1 and next_cursor, no repeats or gaps", async () => {
    for (const n of ["page-c", "page-a", "page-b"]) expect((await put(n, { auth: { scheme: "none" } })).status).toBeLessThan(300);
    const whole = await app.api("/signal-types?limit=500");
    const all = (await whole.json()) as { items: Array<{ name: string }>; next_cursor: string | null };
    expect(all.next_cursor).toBeNull();
    const names = all.items.map((t) => t.name);
    expect(names).toEqual([...names].sort());
    expect(names).toEqual(expect.arrayContaining(["page-a", "page-b", "page-c"]));

    const first = await body(app.api("/signal-types?limit=1"));
    expect(first.items).toHaveLength(1);
    expect(first.next_cursor).toEqual(expect.any(String));

    const paged = await readAll<{ name: string }>(app, "/signal-types", 1);
    expect(paged.items.map((t) => t.name)).toEqual(names);
    expect(paged.pages).toBeGreaterThanOrEqual(names.length);
  });

  it("defaults to 50 per page", async () => {
    for (let i = 0; i < 52; i++) await put(`bulk-${String(i).padStart(2, "0")}`, { auth: { scheme: "none" } });
    const page = await body(app.api("/signal-types"));
    expect(page.items).toHaveLength(50);
    expect(page.next_cursor).toEqual(expect.any(String));
  });
});

describe("DELETE /signal-types/{name}", () => {
  it("answers 204, then the type is gone (GET 404, DELETE 404, intake rejected_unknown_signal)", async () => {
    expect((await put("short-lived", { auth: { scheme: "none" } })).status).toBe(201);
    const del = await app.api("/signal-types/short-lived", { method: "DELETE" });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe("");
    await expectProblem(await app.api("/signal-types/short-lived"), 404);
    await expectProblem(await app.api("/signal-types/short-lived", { method: "DELETE" }), 404);
    const list = await body(app.api("/signal-types?limit=500"));
    expect(list.items.map((t: { name: string }) => t.name)).not.toContain("short-lived");
    const sent = await app.api("/signals/some-run/short-lived", { method: "POST", json: {} });
    expect((await expectProblem(sent, 404)).outcome).toBe("rejected_unknown_signal");
  });

  it("GET of a name never declared is 404 problem+json", async () => {
    await expectProblem(await app.api("/signal-types/never-declared"), 404);
  });
});

describe("invalid declarations change nothing", () => {
  const count = async () => (await body(app.api("/signal-types?limit=500"))).items.length as number;

  it("an invalid JSON Schema is 422 with validation_errors", async () => {
    const before = await count();
    for (const schema of [{ type: "nonsense" }, { minimum: "ten" }, { required: "approved" }, { $ref: "https://example.com/remote.json" }]) {
      const p = await expectProblem(await put("bad-schema", { auth: { scheme: "none" }, schema }), 422);
      expect(p.validation_errors!.length).toBeGreaterThan(0);
      for (const v of p.validation_errors!) {
        expect(v.path).toMatch(/^\/schema/);
        expect(v.message).toEqual(expect.any(String));
      }
    }
    await expectProblem(await app.api("/signal-types/bad-schema"), 404);
    expect(await count()).toBe(before);
  });

  it("an invalid schema on replace keeps the old declaration", async () => {
    expect((await put("keep-old", { auth: { scheme: "none" }, schema: { type: "object" } })).status).toBe(201);
    await expectProblem(await put("keep-old", { auth: { scheme: "none" }, schema: { type: 42 } }), 422);
    await expectProblem(await put("keep-old", { auth: { scheme: "none" }, extra: 1 }), 400);
    expect((await body(app.api("/signal-types/keep-old"))).schema).toEqual({ type: "object" });
  });

  it.each([
    ["an unknown field", { auth: { scheme: "none" }, colour: "red" }, "/colour"],
    ["an unknown auth field", { auth: { scheme: "none", secret: "x" } }, "/auth/secret"],
    ["a bad scheme", { auth: { scheme: "basic" } }, "/auth/scheme"],
    ["a scheme without secrets", { auth: { scheme: "github" } }, "/auth/secrets"],
    ["a scheme with an empty secrets list", { auth: { scheme: "standard-webhooks", secrets: [] } }, "/auth/secrets"],
    ["hmac-sha256 without a header", { auth: { scheme: "hmac-sha256", secrets: ["k"] } }, "/auth/header"],
    ["no auth", { description: "x" }, "/auth"],
    ["a negative buffer_ttl_s", { auth: { scheme: "none" }, buffer_ttl_s: -1 }, "/buffer_ttl_s"],
    ["a string buffer_ttl_s", { auth: { scheme: "none" }, buffer_ttl_s: "10" }, "/buffer_ttl_s"],
    ["a non-object body", [1, 2], ""],
  ])("%s is 400 problem+json naming the field", async (_label, body, pointer) => {
    const before = await count();
    const p = await expectProblem(await put("bad-input-type", body), 400);
    expect(p.validation_errors?.map((v) => v.path).some((path) => path.startsWith(pointer))).toBe(true);
    await expectProblem(await app.api("/signal-types/bad-input-type"), 404);
    expect(await count()).toBe(before);
  });

  it.each([
    ["a Standard Webhooks secret that is not base64 (it could never verify)", { auth: { scheme: "standard-webhooks", secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!"] } }, "/auth/secrets/1"],
    ["a Standard Webhooks secret with nothing after whsec_", { auth: { scheme: "standard-webhooks", secrets: ["whsec_"] } }, "/auth/secrets/0"],
    ["github with neither run_pointer nor replay_across_runs", { auth: { scheme: "github", secrets: ["k"] } }, "/auth/run_pointer"],
    ["shopify with neither run_pointer nor replay_across_runs", { auth: { scheme: "shopify", secrets: ["k"] } }, "/auth/run_pointer"],
    ["hmac-sha256 with neither run_pointer nor replay_across_runs", { auth: { scheme: "hmac-sha256", secrets: ["k"], header: "X-Sig" } }, "/auth/run_pointer"],
    ["github with replay_across_runs: false", { auth: { scheme: "github", secrets: ["k"], replay_across_runs: false } }, "/auth/run_pointer"],
  ])("%s is 422 naming the field, and nothing is declared", async (_label, body, pointer) => {
    const before = await count();
    const p = await expectProblem(await put("bad-auth-type", body), 422);
    expect(p.validation_errors?.map((v) => v.path)).toEqual([pointer]);
    await expectProblem(await app.api("/signal-types/bad-auth-type"), 404);
    expect(await count()).toBe(before);
  });

  it("a body-only scheme is declared with run_pointer, or with replay_across_runs: true (shown back)", async () => {
    const bound = await put("gh-bound-type", { auth: { scheme: "github", secrets: ["k"], run_pointer: "/repository/run" } });
    expect(bound.status).toBe(201);
    const open = await put("gh-open-type", { auth: { scheme: "github", secrets: ["k"], replay_across_runs: true } });
    expect(open.status).toBe(201);
    expect(((await open.json()) as { auth: unknown }).auth).toEqual({ scheme: "github", secret_count: 1, tolerance_s: 300, replay_across_runs: true });
  });

  it.each([
    ["-starts-with-dash"],
    [".dot-first"],
    ["a%20b"],
    ["a%2Fb"],
    ["caf%C3%A9"],
    ["x".repeat(101)],
  ])("a bad name in the path (%s) is 400 on PUT, GET and DELETE", async (name) => {
    const before = await count();
    await expectProblem(await put(name, { auth: { scheme: "none" } }), 400);
    await expectProblem(await app.api(`/signal-types/${name}`), 400);
    await expectProblem(await app.api(`/signal-types/${name}`, { method: "DELETE" }), 400);
    expect(await count()).toBe(before);
  });

  it("a name of exactly 100 characters is fine", async () => {
    expect((await put("n".repeat(100), { auth: { scheme: "none" } })).status).toBe(201);
  });
});

describe("SIGNALBOX_SIGNAL_TYPES_FILE", () => {
  it("an entry holding NUL or a lone surrogate (which PUT refuses) stops the start naming the entry and the field", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "sbx-types-"));
    const file = path.join(dir, "types.json");
    await fs.writeFile(file, '{"nul-desc": {"auth": {"scheme": "github", "secrets": ["env:GH"], "replay_across_runs": true}, "description": "a\\u0000b"}}');
    const failed = await loadSignalTypesFile(app.deps, file, { GH: "gh-secret-not-to-print" }).catch((err: Error) => err.message);
    expect(failed).toMatch(/entry 'nul-desc', field '\/description': .*NUL/);
    expect(failed).not.toContain("gh-secret-not-to-print");
    await fs.writeFile(file, '{"lone-key": {"auth": {"scheme": "none"}, "schema": {"properties": {"\\ud800": {"type": "string"}}}}}');
    await expect(loadSignalTypesFile(app.deps, file, {})).rejects.toThrow(/entry 'lone-key', field '\/schema\/properties\/\uFFFD': .*surrogate/);
    expect((await app.api("/signal-types/nul-desc")).status).toBe(404);
    await fs.rm(dir, { recursive: true });
  });
});
