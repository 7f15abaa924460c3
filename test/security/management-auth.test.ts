// Management API bearer auth: static keys, HS256 JWTs (SIGNALBOX_JWT_SECRET) and JWTs from a
// JWKS (SIGNALBOX_JWKS_URL, served here by a local HTTP server). Every refusal is the same 401
// with WWW-Authenticate, on every route, and changes nothing. security.md §6: #63, #64, #66.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";
import { openWaitFor, post, putType, signStandard, snapshot, swSecret, waitStatus } from "./support.ts";

const ISS = "https://issuer.signalbox.test";
const AUD = "signalbox";
const HS_SECRET = "a-management-jwt-secret-of-40-bytes-long!";
const enc = (s: string) => new TextEncoder().encode(s);
const now = () => Math.floor(Date.now() / 1000);
const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");

/** An HS256 token; `claims` overrides the valid defaults (undefined removes one). */
async function hs(claims: Record<string, unknown> = {}, key: Uint8Array = enc(HS_SECRET), alg = "HS256") {
  const payload = Object.fromEntries(Object.entries({ sub: "ops", iss: ISS, aud: AUD, iat: now(), exp: now() + 300, ...claims }).filter(([, v]) => v !== undefined));
  return new SignJWT(payload).setProtectedHeader({ alg, typ: "JWT" }).sign(key);
}

// --- a JWKS server with switchable answers -----------------------------------------------------
let jwksServer: Server;
let jwksBase: string;
let rsa: Awaited<ReturnType<typeof generateKeyPair>>;
let ec: Awaited<ReturnType<typeof generateKeyPair>>;
let otherRsa: Awaited<ReturnType<typeof generateKeyPair>>;
let jwks: { keys: JWK[] };

async function startJwks() {
  rsa = await generateKeyPair("RS256", { extractable: true });
  ec = await generateKeyPair("ES256", { extractable: true });
  otherRsa = await generateKeyPair("RS256", { extractable: true });
  jwks = {
    keys: [
      { ...(await exportJWK(rsa.publicKey)), kid: "k-rsa", alg: "RS256", use: "sig" },
      { ...(await exportJWK(ec.publicKey)), kid: "k-ec", alg: "ES256", use: "sig" },
    ],
  };
  jwksServer = createServer((req, res) => {
    if (req.url === "/jwks") return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(jwks));
    if (req.url === "/garbage") return res.writeHead(200, { "content-type": "application/json" }).end("{not json at all <html>");
    if (req.url === "/not-a-jwks") return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: "nope" }));
    if (req.url === "/hang") return; // never answers
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => jwksServer.listen(0, "127.0.0.1", r));
  jwksBase = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}`;
}

async function rs(claims: Record<string, unknown> = {}, opts: { kid?: string; key?: CryptoKey; alg?: string } = {}) {
  const payload = Object.fromEntries(Object.entries({ sub: "ops", iss: ISS, aud: AUD, iat: now(), exp: now() + 300, ...claims }).filter(([, v]) => v !== undefined));
  const alg = opts.alg ?? "RS256";
  return new SignJWT(payload).setProtectedHeader({ alg, kid: opts.kid ?? "k-rsa", typ: "JWT" }).sign(opts.key ?? rsa.privateKey);
}

// -------------------------------------------------------------------------------------------------
let hsApp: TestApp;
let jwksApp: TestApp;
beforeAll(async () => {
  await startJwks();
  const common = { SIGNALBOX_JWT_ISSUER: ISS, SIGNALBOX_JWT_AUDIENCE: AUD };
  [hsApp, jwksApp] = await Promise.all([
    startTestApp({ worker: false, env: { ...common, SIGNALBOX_JWT_SECRET: HS_SECRET } }),
    startTestApp({ worker: false, env: { ...common, SIGNALBOX_JWKS_URL: `${jwksBase}/jwks` } }),
  ]);
});
afterAll(async () => {
  await Promise.all([hsApp?.close(), jwksApp?.close()]);
  await new Promise((r) => jwksServer?.close(r));
});

/** GET /signal-types with exactly this Authorization header (none when undefined). */
async function call(app: TestApp, authorization: string | undefined, path = "/signal-types", init: RequestInit = {}) {
  const headers = new Headers(init.headers);
  if (authorization !== undefined) headers.set("authorization", authorization);
  return fetch(app.baseUrl + path, { ...init, headers });
}

/** A 401 with WWW-Authenticate: Bearer and the shared body (returned without its request id). */
async function expect401(res: Response) {
  const text = await res.text();
  expect(res.status, text).toBe(401);
  expect(res.headers.get("www-authenticate") ?? "").toMatch(/^Bearer( |$)/);
  expect(res.headers.get("content-type") ?? "").toMatch(/^application\/problem\+json/);
  const { request_id: _r, ...body } = JSON.parse(text) as Record<string, unknown>;
  expect(body).toMatchObject({ status: 401, type: expect.any(String), title: expect.any(String), detail: expect.any(String) });
  return body;
}

describe("the Authorization header", () => {
  it("refused with the same 401: none, Basic, empty Bearer, Bearer alone, a tab, two tokens, the token in ?access_token=, a wrong key", async () => {
    const bodies = [];
    for (const h of [undefined, `Basic ${Buffer.from(`x:${API_KEY}`).toString("base64")}`, "Bearer ", "Bearer", `Bearer\t${API_KEY}`, `Bearer ${API_KEY} ${API_KEY}`, `Token ${API_KEY}`, API_KEY, `Bearer ${API_KEY}x`, `Bearer ${API_KEY.slice(0, -1)}`]) {
      bodies.push(await expect401(await call(hsApp, h)));
    }
    bodies.push(await expect401(await call(hsApp, undefined, `/signal-types?access_token=${API_KEY}`)));
    for (const b of bodies) expect(b).toEqual(bodies[0]);
  });

  it("accepted: the static key with Bearer, bearer, BEARER, and with two spaces (RFC 6750: 1*SP)", async () => {
    for (const h of [`Bearer ${API_KEY}`, `bearer ${API_KEY}`, `BEARER ${API_KEY}`, `Bearer  ${API_KEY}`]) {
      expect((await call(hsApp, h)).status, h).toBe(200);
    }
  });

  it("a 9 kB token is refused without work (401), not an error", async () => {
    await expect401(await call(hsApp, `Bearer ${"a".repeat(9000)}`));
  });

  it("the same 401 body on every management route, and a refused write changes nothing", async () => {
    const routes: Array<[string, string, unknown?]> = [
      ["GET", "/signal-types"],
      ["PUT", "/signal-types/t-unauth", { auth: { scheme: "none" } }],
      ["DELETE", "/signal-types/t-unauth"],
      ["POST", "/runs/r-unauth/waits", { signal: "x" }],
      ["GET", "/waits?signal=x"],
      ["GET", "/waits/wt_01m80000000000000000000000"],
      ["POST", "/waits/wt_01m80000000000000000000000/cancel"],
      ["GET", "/runs/r-unauth"],
      ["POST", "/runs/r-unauth/cancel", { reason: "x", by: "y" }],
      ["GET", "/runs/r-unauth/signals"],
      ["GET", "/signals"],
      ["POST", "/signals/batch", { signals: [{ run_id: "r-unauth", signal: "x", payload: {} }] }],
    ];
    const before = await snapshot(hsApp);
    const bodies = [];
    for (const [method, path, json] of routes) {
      for (const h of [undefined, "Bearer wrong"]) {
        const res = await call(hsApp, h, path, { method, ...(json ? { body: JSON.stringify(json), headers: { "content-type": "application/json" } } : {}) });
        bodies.push(await expect401(res));
      }
    }
    for (const b of bodies) expect(b).toEqual(bodies[0]);
    expect(await snapshot(hsApp)).toEqual(before);
  });

  it("public routes need no token: /healthz, /metrics, /openapi.json", async () => {
    for (const path of ["/healthz", "/metrics", "/openapi.json"]) expect((await call(hsApp, undefined, path)).status, path).toBe(200);
  });
});

describe("HS256 JWTs (SIGNALBOX_JWT_SECRET, with issuer and audience configured)", () => {
  it("a valid token: 200; the static key still works beside it", async () => {
    expect((await call(hsApp, `Bearer ${await hs()}`)).status).toBe(200);
    expect((await call(hsApp, `Bearer ${API_KEY}`)).status).toBe(200);
  });

  it("expired 10 s ago (within the 30 s clock tolerance): accepted", async () => {
    expect((await call(hsApp, `Bearer ${await hs({ exp: now() - 10 })}`)).status).toBe(200);
  });

  const refused: Array<[string, () => Promise<string>]> = [
    ["alg none", async () => `${b64({ alg: "none", typ: "JWT" })}.${b64({ sub: "ops", iss: ISS, aud: AUD, exp: now() + 300 })}.`],
    ["alg none with a signature part", async () => `${b64({ alg: "none" })}.${b64({ sub: "ops", iss: ISS, aud: AUD, exp: now() + 300 })}.AAAA`],
    ["expired beyond the tolerance", () => hs({ exp: now() - 120 })],
    ["no exp", () => hs({ exp: undefined })],
    ["nbf an hour ahead", () => hs({ nbf: now() + 3600 })],
    ["wrong issuer", () => hs({ iss: "https://evil.example" })],
    ["no issuer", () => hs({ iss: undefined })],
    ["wrong audience", () => hs({ aud: "another-service" })],
    ["no audience", () => hs({ aud: undefined })],
    ["signed with another secret", () => hs({}, enc("another-secret-that-is-also-32-bytes-long"))],
    ["signed with a short key", () => hs({}, enc("short"))],
    ["HS512 with the right secret (algorithm pinned to HS256)", () => hs({}, enc(HS_SECRET), "HS512")],
    ["payload changed after signing", async () => {
      const [h, , s] = (await hs()).split(".");
      return `${h}.${b64({ sub: "admin", iss: ISS, aud: AUD, exp: now() + 300 })}.${s}`;
    }],
    ["a token with trailing garbage", async () => `${await hs()}.x`],
  ];
  for (const [what, make] of refused) {
    it(`${what}: 401`, async () => {
      await expect401(await call(hsApp, `Bearer ${await make()}`));
    });
  }

  it("the config refuses a JWT secret shorter than 32 bytes", () => {
    expect(() => loadConfig({ SIGNALBOX_JWT_SECRET: "short-secret" })).toThrow(/32 bytes/);
  });
});

describe("JWTs from a JWKS (SIGNALBOX_JWKS_URL)", () => {
  it("RS256 and ES256 tokens whose kid is in the JWKS: 200", async () => {
    expect((await call(jwksApp, `Bearer ${await rs()}`)).status).toBe(200);
    expect((await call(jwksApp, `Bearer ${await rs({}, { kid: "k-ec", key: ec.privateKey, alg: "ES256" })}`)).status).toBe(200);
  });

  const refused: Array<[string, () => Promise<string>]> = [
    ["an unknown kid", () => rs({}, { kid: "k-unknown" })],
    ["the right kid, signed by another key", () => rs({}, { key: otherRsa.privateKey })],
    ["HS256 signed with the JWKS public key PEM (algorithm confusion)", async () => hs({}, enc(await exportSPKI(rsa.publicKey)))],
    ["HS256 with any secret (a JWKS resolves asymmetric keys only)", () => hs()],
    ["alg none", async () => `${b64({ alg: "none", kid: "k-rsa" })}.${b64({ sub: "ops", iss: ISS, aud: AUD, exp: now() + 300 })}.`],
    ["an RS256 header on the EC key's kid", () => rs({}, { kid: "k-ec" })],
    ["expired", () => rs({ exp: now() - 120 })],
    ["no exp", () => rs({ exp: undefined })],
    ["wrong issuer", () => rs({ iss: "https://other-idp.example" })],
    ["wrong audience", () => rs({ aud: "other" })],
  ];
  for (const [what, make] of refused) {
    it(`${what}: 401`, async () => {
      await expect401(await call(jwksApp, `Bearer ${await make()}`));
    });
  }

  it("a JWKS that answers garbage, or not a key set: fail closed (401), the service stays up", async () => {
    await Promise.all(
      ["/garbage", "/not-a-jwks"].map(async (path) => {
        const app = await startTestApp({ worker: false, env: { SIGNALBOX_JWKS_URL: `${jwksBase}${path}`, SIGNALBOX_JWT_ISSUER: ISS, SIGNALBOX_JWT_AUDIENCE: AUD } });
        try {
          await expect401(await call(app, `Bearer ${await rs()}`));
          expect((await call(app, `Bearer ${API_KEY}`)).status).toBe(200);
          expect((await fetch(`${app.baseUrl}/healthz`)).status).toBe(200);
        } finally {
          await app.close();
        }
      }),
    );
  });

  it("a JWKS that never answers: 401 within the 3 s fetch timeout", async () => {
    const app = await startTestApp({ worker: false, env: { SIGNALBOX_JWKS_URL: `${jwksBase}/hang`, SIGNALBOX_JWT_ISSUER: ISS, SIGNALBOX_JWT_AUDIENCE: AUD } });
    try {
      const started = Date.now();
      await expect401(await call(app, `Bearer ${await rs()}`));
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      await app.close();
    }
  }, 15_000);
});

describe("a valid management token is accepted on intake, for any signal type", () => {
  it("static key, HS256 JWT and JWKS JWT each resolve waits of signed types; an invalid JWT does not", async () => {
    for (const app of [hsApp, jwksApp]) {
      await putType(app, "signed-sw", { auth: { scheme: "standard-webhooks", secrets: [swSecret(11)] } });
      await putType(app, "signed-gh", { auth: { scheme: "github", secrets: ["gh"], run_pointer: "/run" } });
    }
    const cases: Array<[TestApp, string]> = [
      [hsApp, API_KEY],
      [hsApp, await hs()],
      [jwksApp, await rs()],
    ];
    let i = 0;
    for (const [app, token] of cases) {
      for (const type of ["signed-sw", "signed-gh"]) {
        const run = `mgmt-intake-${++i}`;
        const waitId = await openWaitFor(app, run, type);
        const a = await post(app, run, type, '{"run":"somewhere-else"}', { authorization: `Bearer ${token}` });
        expect(a.status, a.text).toBe(202);
        expect(await waitStatus(app, waitId)).toBe("received");
      }
    }
    const run = "mgmt-intake-bad";
    const waitId = await openWaitFor(hsApp, run, "signed-sw");
    const before = await snapshot(hsApp);
    const a = await post(hsApp, run, "signed-sw", "{}", { authorization: `Bearer ${await hs({ exp: undefined })}` });
    expect(a.status).toBe(401);
    expect(await snapshot(hsApp)).toEqual(before);
    expect(await waitStatus(hsApp, waitId)).toBe("waiting");
  });

  it("a valid signature with a bad bearer token beside it is still judged by the signature", async () => {
    const secret = swSecret(11);
    const run = "mgmt-intake-sig";
    const waitId = await openWaitFor(hsApp, run, "signed-sw");
    const body = '{"ok":1}';
    const a = await post(hsApp, run, "signed-sw", body, { ...signStandard(secret, body), authorization: "Bearer not-a-token" });
    expect(a.status, a.text).toBe(202);
    expect(await waitStatus(hsApp, waitId)).toBe("received");
  });
});
