// Signing secrets are write-only: never in a response (only secret_count), never in the logs
// (captured at debug level), stored encrypted when SIGNALBOX_SECRET_KEY is set, and bound to
// their signal type (a ciphertext copied to another type's row does not verify; AES-GCM AAD).
import { createHmac, randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";
import { expectRefusedUnchanged, type Hdrs, openWaitFor, post, putType, signGithub, signShopify, signSlack, signStandard, signStripe, snapshot, swKey, unauthenticatedCount, updateTypeRow, waitStatus } from "./support.ts";

const SECRET_KEY = randomBytes(32).toString("hex");
const tag = randomBytes(6).toString("hex");
// Recognisable secrets, one per scheme (the Standard Webhooks one is 32 random bytes).
const SECRETS: Record<string, { auth: Record<string, unknown>; secret: string; sign(secret: string, body: string): Hdrs | Promise<Hdrs> }> = {
  "s-sw": { auth: { scheme: "standard-webhooks" }, secret: `whsec_${randomBytes(32).toString("base64")}`, sign: (s, b) => signStandard(s, b) },
  "s-stripe": { auth: { scheme: "stripe" }, secret: `whsec_stripe_${tag}_SENTINEL`, sign: (s, b) => signStripe(s, b) },
  "s-github": { auth: { scheme: "github", replay_across_runs: true }, secret: `gh_${tag}_SENTINEL`, sign: (s, b) => signGithub(s, b) },
  "s-shopify": { auth: { scheme: "shopify", replay_across_runs: true }, secret: `shp_${tag}_SENTINEL`, sign: (s, b) => signShopify(s, b) },
  "s-slack": { auth: { scheme: "slack" }, secret: `slk_${tag}_SENTINEL`, sign: (s, b) => signSlack(s, b) },
  "s-generic": { auth: { scheme: "hmac-sha256", header: "X-Sig", replay_across_runs: true }, secret: `gen_${tag}_SENTINEL`, sign: (s, b) => ({ "x-sig": createHex(s, b) }) },
};
function createHex(secret: string, body: string) {
  return createHmac("sha256", secret).update(body).digest("hex");
}
const PAYLOAD_SENTINEL = `payload_${tag}_SENTINEL`;

/** Every form a secret could leak in: as written, its key bytes in base64/hex, and (SW) the bare base64. */
function leakForms(secret: string): string[] {
  const forms = [secret, Buffer.from(secret).toString("base64"), Buffer.from(secret).toString("hex")];
  if (secret.startsWith("whsec_")) forms.push(secret.slice(6), swKey(secret).toString("hex"), swKey(secret).toString("base64url"));
  return forms;
}
const ALL_FORMS = Object.values(SECRETS).flatMap((s) => leakForms(s.secret));

const logLines: string[] = [];
const logStream = new Writable({
  write(chunk, _enc, cb) {
    logLines.push(String(chunk));
    cb();
  },
});
const responses: string[] = [];
/** fetch through the app, keeping every response text (and headers) for the leak check. */
async function keep(res: Response): Promise<Response> {
  const text = await res.clone().text();
  responses.push(JSON.stringify([...res.headers.entries()]) + "\n" + text);
  return res;
}

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_SECRET_KEY: SECRET_KEY, LOG_LEVEL: "debug" }, logStream });
  for (const [name, s] of Object.entries(SECRETS)) {
    await keep(await app.api(`/signal-types/${name}`, { method: "PUT", json: { auth: { ...s.auth, secrets: [s.secret] }, buffer_ttl_s: 3600 } }));
  }
});
afterAll(async () => {
  await app?.close();
});

/** A second, rotated-in secret of the same scheme (Standard Webhooks secrets must be base64). */
const secondSecret = (scheme: string, secret: string) => (scheme === "standard-webhooks" ? `whsec_${randomBytes(24).toString("base64")}` : `${secret}x`);

function expectNoLeak(texts: string[], where: string) {
  for (const t of texts) for (const form of ALL_FORMS) expect(t.includes(form), `${where} contains a secret (${form.slice(0, 12)}...)`).toBe(false);
}

describe("secrets never leave the server", () => {
  it("PUT, GET one, GET all show secret_count only", async () => {
    for (const [name, s] of Object.entries(SECRETS)) {
      const put = await keep(await app.api(`/signal-types/${name}`, { method: "PUT", json: { auth: { ...s.auth, secrets: [s.secret, secondSecret(String(s.auth.scheme), s.secret)] }, buffer_ttl_s: 3600 } }));
      expect(put.status).toBe(200);
      const body = (await put.json()) as { auth: Record<string, unknown> };
      expect(body.auth).toMatchObject({ scheme: s.auth.scheme, secret_count: 2 });
      expect(body.auth).not.toHaveProperty("secrets");
      const one = (await (await keep(await app.api(`/signal-types/${name}`))).json()) as { auth: Record<string, unknown> };
      expect(one.auth).toMatchObject({ secret_count: 2 });
      // back to one secret for the tests below
      await keep(await app.api(`/signal-types/${name}`, { method: "PUT", json: { auth: { ...s.auth, secrets: [s.secret] }, buffer_ttl_s: 3600 } }));
    }
    await keep(await app.api("/signal-types"));
    await keep(await app.api("/openapi.json"));
  });

  it("refused PUTs do not echo the secret: too long, too many, a bad scheme, an unknown field beside it", async () => {
    const secret = SECRETS["s-github"]!.secret;
    const bodies = [
      { auth: { scheme: "github", secrets: [secret + "y".repeat(600)] } },
      { auth: { scheme: "github", secrets: Array.from({ length: 11 }, () => secret) } },
      { auth: { scheme: "not-a-scheme", secrets: [secret] } },
      { auth: { scheme: "github", secrets: [secret], extra: secret } },
      { auth: { scheme: "github", secrets: [secret] }, schema: { type: "nope" } },
      { auth: { scheme: "hmac-sha256", secrets: [secret] } },
    ];
    for (const json of bodies) {
      const res = await keep(await app.api("/signal-types/s-refused", { method: "PUT", json }));
      expect([400, 422]).toContain(res.status);
    }
  });

  it("intake answers of every kind carry no secret", async () => {
    for (const [name, s] of Object.entries(SECRETS)) {
      const run = `leak-${name}`;
      await openWaitFor(app, run, name);
      const body = JSON.stringify({ note: PAYLOAD_SENTINEL });
      const wrongSecret = s.auth.scheme === "standard-webhooks" ? `whsec_${randomBytes(32).toString("base64")}` : "wrong-secret-value-0123456789";
      const answers = [
        await post(app, run, name, body, await s.sign(s.secret, body)),
        await post(app, run, name, body, await s.sign(s.secret, body)),
        await post(app, run, name, body, await s.sign(wrongSecret, body)),
        await post(app, run, name, "not json", await s.sign(s.secret, "not json")),
      ];
      // received; then a duplicate (a scheme with a delivery id), buffered (a type that buffers),
      // or not waiting any more (the wait took the first); a wrong signature; a body that is not JSON.
      expect(answers.map((a) => a.body?.outcome ?? a.status), name).toEqual([
        "received",
        expect.stringMatching(/^(duplicate|buffered|rejected_not_waiting)$/),
        "rejected_unauthenticated",
        "invalid_json",
      ]);
      responses.push(...answers.map((a) => a.text));
      await keep(await app.api(`/runs/${run}/signals`));
    }
  });

  it("no response seen in this file holds a secret", () => {
    expect(responses.length).toBeGreaterThan(20);
    expectNoLeak(responses, "a response");
  });

  it("the debug-level log holds no secret, no management key and no payload", async () => {
    // No wait needed: the access log writes each line to this capture synchronously, before the
    // response it describes is sent, so every request awaited so far is already in.
    expect(logLines.length).toBeGreaterThan(20); // the capture works: request lines were written
    expect(logLines.join("")).toMatch(/"msg":"request"/);
    expectNoLeak(logLines, "the log");
    const all = logLines.join("");
    expect(all).not.toContain(API_KEY);
    expect(all).not.toContain(PAYLOAD_SENTINEL);
  });
});

describe("at rest: encrypted under SIGNALBOX_SECRET_KEY, bound to the signal type", () => {
  it("the signal_types rows hold enc:v1: ciphertexts and no plaintext form of any secret", async () => {
    const rows = await app.database.sql`select name, auth::text as auth from signalbox.signal_types where name like 's-%'`;
    expect(rows.length).toBe(Object.keys(SECRETS).length);
    for (const row of rows) {
      const auth = JSON.parse(row.auth as string) as { secrets: string[] };
      expect(auth.secrets.length).toBe(1);
      for (const s of auth.secrets) expect(s).toMatch(/^enc:v1:[A-Za-z0-9+/=]+$/);
    }
    expectNoLeak(rows.map((r) => String(r.auth)), "signal_types.auth");
    // Sealing twice gives different ciphertexts (random IV).
    const [a] = await app.database.sql`select auth->'secrets'->>0 as c from signalbox.signal_types where name = 's-github'`;
    await putType(app, "s-github", { auth: { scheme: "github", secrets: [SECRETS["s-github"]!.secret], replay_across_runs: true }, buffer_ttl_s: 3600 });
    const [b] = await app.database.sql`select auth->'secrets'->>0 as c from signalbox.signal_types where name = 's-github'`;
    expect(a!.c).not.toBe(b!.c);
  });

  it("the encrypted secrets verify: a signed request is received", async () => {
    const s = SECRETS["s-github"]!;
    const waitId = await openWaitFor(app, "rest-ok", "s-github");
    const body = '{"ok":1}';
    expect((await post(app, "rest-ok", "s-github", body, await s.sign(s.secret, body))).status).toBe(202);
    expect(await waitStatus(app, waitId)).toBe("received");
  });

  it("a ciphertext copied to another signal type's row does not verify there (401, not 500); the original still does", async () => {
    const src = SECRETS["s-shopify"]!;
    await putType(app, "s-target", { auth: { scheme: "shopify", secrets: ["target-own-secret"], replay_across_runs: true }, buffer_ttl_s: 3600 });
    await updateTypeRow(app, "s-target", () => app.database.sql`update signalbox.signal_types set auth = jsonb_set(auth, '{secrets}', (select auth->'secrets' from signalbox.signal_types where name = 's-shopify')) where name = 's-target'`);
    const body = '{"copied":1}';
    const before = await unauthenticatedCount(app);
    await expectRefusedUnchanged(app, () => post(app, "rest-copy", "s-target", body, signShopify(src.secret, body)));
    await expectRefusedUnchanged(app, () => post(app, "rest-copy", "s-target", body, signShopify("target-own-secret", body)));
    expect(await unauthenticatedCount(app)).toBe(before + 2);
    expect((await post(app, "rest-copy", "s-shopify", body, signShopify(src.secret, body))).status).toBe(202);
  });

  it("a tampered or truncated ciphertext: 401, not 500", async () => {
    const s = SECRETS["s-slack"]!;
    await putType(app, "s-tamper", { auth: { scheme: "slack", secrets: [s.secret] }, buffer_ttl_s: 3600 });
    const [row] = await app.database.sql`select auth->'secrets'->>0 as c from signalbox.signal_types where name = 's-tamper'`;
    const c = String(row!.c);
    const flipped = c.slice(0, -6) + (c.at(-6) === "A" ? "B" : "A") + c.slice(-5);
    for (const bad of [flipped, c.slice(0, 20), "enc:v1:", "enc:v1:!!!"]) {
      await updateTypeRow(app, "s-tamper", () => app.database.sql`update signalbox.signal_types set auth = jsonb_set(auth, '{secrets}', ${JSON.stringify([bad])}::jsonb) where name = 's-tamper'`);
      const body = '{"t":1}';
      await expectRefusedUnchanged(app, () => post(app, "rest-tamper", "s-tamper", body, signSlack(s.secret, body)));
    }
  });

  it("another process on the same database without the key, or with another key: 401 (fail closed), never 500", async () => {
    const s = SECRETS["s-github"]!;
    const envs: Array<Record<string, string>> = [{}, { SIGNALBOX_SECRET_KEY: randomBytes(32).toString("base64") }];
    for (const env of envs) {
      const other = await startTestApp({ worker: false, databaseUrl: app.databaseUrl, env });
      try {
        const body = '{"other":1}';
        const h = await signGithub(s.secret, body);
        await expectRefusedUnchanged(other, () => post(other, "rest-other", "s-github", body, h));
        // A management token is still accepted there (the type's secrets are not needed for it).
        await openWaitFor(other, "rest-other-mgmt", "s-github");
        expect((await post(other, "rest-other-mgmt", "s-github", body, { authorization: `Bearer ${API_KEY}` })).status).toBe(202);
      } finally {
        // closing drops the database only when the app created it: this one reuses app's.
        await other.close();
      }
    }
  });

  it("after all of this, the log still holds no secret", () => {
    expectNoLeak(logLines, "the log");
  });
});

describe("unauthenticated attempts are counted, not recorded", () => {
  it("/metrics counts them; the signal log and the waits do not move", async () => {
    const waitId = await openWaitFor(app, "count-1", "s-sw");
    const before = await snapshot(app);
    const count = await unauthenticatedCount(app);
    for (let i = 0; i < 5; i++) expect((await post(app, "count-1", "s-sw", "{}", {})).status).toBe(401);
    expect(await unauthenticatedCount(app)).toBe(count + 5);
    expect(await snapshot(app)).toEqual(before);
    expect(await waitStatus(app, waitId)).toBe("waiting");
  });
});
