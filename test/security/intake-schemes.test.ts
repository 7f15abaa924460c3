// Every intake auth scheme end to end over HTTP: signed by an independent signer (standardwebhooks,
// svix, stripe, @octokit/webhooks-methods; Shopify, Slack and the generic scheme by their
// documented recipes), then tampered with. Every refusal leaves every table as it was, is
// counted in /metrics, and looks the same whatever the cause.
// security.md §6: #1–#11, #18, #20, #21, #23–#30, #56.
import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";
import {
  expectRefusedUnchanged,
  type Hdrs,
  nowS,
  openWaitFor,
  post,
  putType,
  runSignals,
  signGeneric,
  signGithub,
  signShopify,
  signSlack,
  signStandard,
  signStripe,
  signSvix,
  snapshot,
  swKey,
  swSecret,
  unauthBody,
  waitStatus,
  type SignOpts,
} from "./support.ts";

const TOL = 60; // tolerance_s of every timestamped type here

interface Scheme {
  type: string;
  auth: Record<string, unknown>;
  secret: string;
  other: string;
  timestamped: boolean;
  required: string[];
  sign(secret: string, body: string, o?: SignOpts): Hdrs | Promise<Hdrs>;
}

const SCHEMES: Scheme[] = [
  { type: "sw-lib", auth: { scheme: "standard-webhooks" }, secret: swSecret(1), other: swSecret(2), timestamped: true, required: ["webhook-id", "webhook-timestamp", "webhook-signature"], sign: signStandard },
  { type: "sw-svix", auth: { scheme: "standard-webhooks" }, secret: swSecret(3), other: swSecret(4), timestamped: true, required: ["webhook-id", "webhook-timestamp", "webhook-signature"], sign: signSvix },
  { type: "stripe", auth: { scheme: "stripe" }, secret: "whsec_stripe_endpoint_secret_one", other: "whsec_stripe_endpoint_secret_two", timestamped: true, required: ["stripe-signature"], sign: signStripe },
  { type: "github", auth: { scheme: "github", replay_across_runs: true }, secret: "It's a Secret to Everybody", other: "It's a Secret to Nobody", timestamped: false, required: ["x-hub-signature-256"], sign: (s, b) => signGithub(s, b) },
  { type: "shopify", auth: { scheme: "shopify", replay_across_runs: true }, secret: "shpss_app_client_secret_1", other: "shpss_app_client_secret_2", timestamped: false, required: ["x-shopify-hmac-sha256"], sign: signShopify },
  { type: "slack", auth: { scheme: "slack" }, secret: "8f742231b10e8888abcd99yyyzzz85a5", other: "8f742231b10e8888abcd99yyyzzz85a6", timestamped: true, required: ["x-slack-request-timestamp", "x-slack-signature"], sign: signSlack },
  { type: "generic", auth: { scheme: "hmac-sha256", header: "X-Signature", replay_across_runs: true }, secret: "generic-shared-secret", other: "generic-other-secret", timestamped: false, required: ["x-signature"], sign: signGeneric("x-signature") },
];

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  for (const s of SCHEMES) {
    await putType(app, s.type, { auth: { ...s.auth, secrets: [s.secret], tolerance_s: TOL }, schema: { type: "object", required: ["n"] } });
    // Rotation: both secrets active; buffered, so no wait is needed to accept.
    await putType(app, `${s.type}-rot`, { auth: { ...s.auth, secrets: [s.other, s.secret], tolerance_s: TOL }, buffer_ttl_s: 3600 });
  }
});
afterAll(async () => {
  await app?.close();
});

let seq = 0;
const runId = (p: string) => `${p}-${++seq}`;
const without = (h: Hdrs, name: string) => Object.fromEntries(Object.entries(h).filter(([k]) => k !== name));

describe.each(SCHEMES)("$type", (s) => {
  // Not in JSON.stringify's form, so any re-serialisation changes the bytes.
  const body = (n: number) => `{"n": ${n}, "note": "signed bytes, exactly"}`;

  it("a request signed by the independent signer is received: 202, one signal with the exact bytes", async () => {
    const run = runId(s.type);
    const waitId = await openWaitFor(app, run, s.type);
    const text = body(1);
    const r = await post(app, run, s.type, text, await s.sign(s.secret, text));
    expect(r.status, r.text).toBe(202);
    expect(r.body).toMatchObject({ outcome: "received", wait_id: waitId, sequence: 1 });
    expect(await waitStatus(app, waitId)).toBe("received");
    const [row] = await app.database.sql`select payload from signalbox.signals where run_id = ${run}`;
    expect(row!.payload).toBe(text);
  });

  it("wrong secret, flipped byte, trailing newline, pretty-printed, reordered keys: 401, nothing changes, same body every time", async () => {
    const run = runId(s.type);
    const waitId = await openWaitFor(app, run, s.type);
    const text = body(2);
    const attempts: Array<[string, () => Promise<Hdrs>, string]> = [
      ["wrong secret", async () => s.sign(s.other, text), text],
      ["flipped byte", async () => s.sign(s.secret, text), text.replace('"n": 2', '"n": 3')],
      ["trailing newline", async () => s.sign(s.secret, text), text + "\n"],
      ["re-serialised (pretty)", async () => s.sign(s.secret, text), JSON.stringify(JSON.parse(text), null, 2)],
      ["re-serialised (compact)", async () => s.sign(s.secret, text), JSON.stringify(JSON.parse(text))],
      ["keys reordered", async () => s.sign(s.secret, text), '{"note": "signed bytes, exactly", "n": 2}'],
      ["signed over another body", async () => s.sign(s.secret, body(9)), text],
    ];
    const bodies = [];
    for (const [what, headers, sent] of attempts) {
      const h = await headers();
      const a = await expectRefusedUnchanged(app, () => post(app, run, s.type, sent, h));
      expect(a.body, what).not.toHaveProperty("validation_errors");
      bodies.push(unauthBody(a));
    }
    for (const b of bodies) expect(b).toEqual(bodies[0]);
    expect(await waitStatus(app, waitId)).toBe("waiting");
  });

  it("each required header missing in turn, and all of them: 401, the same body", async () => {
    const run = runId(s.type);
    const text = body(3);
    const h = await s.sign(s.secret, text);
    const bodies = [];
    for (const name of [...s.required, "*"]) {
      const sent = name === "*" ? {} : without(h, name);
      bodies.push(unauthBody(await expectRefusedUnchanged(app, () => post(app, run, s.type, text, sent))));
    }
    for (const b of bodies) expect(b).toEqual(bodies[0]);
  });

  it("an invalid payload from an unauthenticated sender: 401, no schema details", async () => {
    const a = await expectRefusedUnchanged(app, () => post(app, runId(s.type), s.type, '{"no_n":true}', {}));
    expect(a.text).not.toMatch(/required|validation_errors|"\/n"/);
  });

  it("a management token instead of a signature is accepted (any scheme)", async () => {
    const run = runId(s.type);
    const waitId = await openWaitFor(app, run, s.type);
    const r = await post(app, run, s.type, body(4), { authorization: `Bearer ${API_KEY}` });
    expect(r.status, r.text).toBe(202);
    expect(await waitStatus(app, waitId)).toBe("received");
  });

  it("a wrong management token does not replace a signature: 401", async () => {
    await expectRefusedUnchanged(app, () => post(app, runId(s.type), s.type, body(4), { authorization: `Bearer ${API_KEY}x` }));
  });

  if (s.timestamped) it(`timestamps: ${TOL - 10}s old and ahead accepted; ${TOL + 10}s old (stale) and ahead (future) refused`, async () => {
    const now = nowS();
    for (const ts of [now - TOL + 10, now + TOL - 10]) {
      const text = body(ts);
      const r = await post(app, runId(s.type), `${s.type}-rot`, text, await s.sign(s.secret, text, { ts }));
      expect(r.status, `ts ${ts - now}: ${r.text}`).toBe(202);
    }
    for (const ts of [now - TOL - 10, now + TOL + 10, now - 86400, now + 3600, 0]) {
      const text = body(ts);
      const h = await s.sign(s.secret, text, { ts });
      await expectRefusedUnchanged(app, () => post(app, runId(s.type), `${s.type}-rot`, text, h));
    }
  });

  it("rotation: with two secrets active both verify; once the old one is removed its signatures are refused", async () => {
    const rot = `${s.type}-rot2`;
    await putType(app, rot, { auth: { ...s.auth, secrets: [s.other, s.secret], tolerance_s: TOL }, buffer_ttl_s: 3600 });
    for (const secret of [s.secret, s.other]) {
      const text = body(secret.length);
      const r = await post(app, runId(s.type), rot, text, await s.sign(secret, text));
      expect(r.status, r.text).toBe(202);
      expect(r.body).toMatchObject({ outcome: "buffered" });
    }
    await putType(app, rot, { auth: { ...s.auth, secrets: [s.secret], tolerance_s: TOL }, buffer_ttl_s: 3600 });
    const text = body(77);
    const old = await s.sign(s.other, text);
    await expectRefusedUnchanged(app, () => post(app, runId(s.type), rot, text, old));
    const r = await post(app, runId(s.type), rot, text, await s.sign(s.secret, text));
    expect(r.status, r.text).toBe(202);
  });

  it("a request signed with another signal type's secret: 401", async () => {
    const foreign = SCHEMES.find((o) => o !== s && o.auth.scheme === s.auth.scheme)?.secret ?? s.other;
    const text = body(5);
    const h = await s.sign(foreign, text);
    await expectRefusedUnchanged(app, () => post(app, runId(s.type), s.type, text, h));
  });

  it("an empty body with a valid signature over \"\": 400 invalid_json (never a 5xx)", async () => {
    const run = runId(s.type);
    const waitId = await openWaitFor(app, run, s.type);
    const r = await post(app, run, s.type, "", await s.sign(s.secret, ""));
    expect(r.status, r.text).toBe(400);
    expect(r.body).toMatchObject({ outcome: "invalid_json" });
    expect(await waitStatus(app, waitId)).toBe("waiting");
  });
});

describe("standard-webhooks header grammar", () => {
  const S = SCHEMES[0]!;
  const text = '{"n":10}';
  const mac = (id: string, ts: string, key = swKey(S.secret)) => createHmac("sha256", key).update(`${id}.${ts}.${text}`).digest();
  const refused = async (h: Hdrs, what: string) => {
    const a = await expectRefusedUnchanged(app, () => post(app, runId("swg"), S.type, text, h));
    expect(a.status, what).toBe(401);
  };

  it("malformed v1 entries: empty, truncated, 43 chars, base64url alphabet, junk, hex, no padding", async () => {
    const ts = String(nowS());
    // An id whose MAC has '+' or '/' in base64, so its base64url form really differs.
    let k = 0;
    while (!/[+/]/.test(mac(`msg_grammar_5_${k}`, ts).toString("base64"))) k++;
    const id = `msg_grammar_5_${k}`;
    const good = mac(id, ts).toString("base64");
    const forms = {
      empty: "v1,",
      truncated: `v1,${good.slice(0, 20)}`,
      "43 chars": `v1,${good.slice(0, 43)}`,
      base64url: `v1,${mac(id, ts).toString("base64url")}=`,
      junk: `v1,${good.slice(0, 10)}!!${good.slice(12)}`,
      hex: `v1,${mac(id, ts).toString("hex")}`,
      "trailing comma": `v1,${good},`,
      "trailing junk": `v1,${good},junk`,
      "double space": `v1,${good}  v1,${good}`,
      "no comma": `v1${good}`,
    };
    for (const [what, sig] of Object.entries(forms)) await refused({ "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig }, what);
  });

  it("only unknown versions (v2, V1, v1a, v0) carrying the right MAC: 401", async () => {
    const id = "msg_grammar_6";
    const ts = String(nowS());
    const good = mac(id, ts).toString("base64");
    for (const v of ["v2", "V1", "v1a", "v0"]) await refused({ "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": `${v},${good}` }, v);
  });

  it("a rotation list `v1,<bad> v1,<good> v2,<x>` is accepted", async () => {
    const id = "msg_grammar_7";
    const ts = String(nowS());
    const sig = `v1,${mac(id, ts, swKey(S.other)).toString("base64")} v1,${mac(id, ts).toString("base64")} v2,${Buffer.alloc(32).toString("base64")}`;
    const run = runId("swg");
    await openWaitFor(app, run, S.type);
    const r = await post(app, run, S.type, text, { "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig });
    expect(r.status, r.text).toBe(202);
  });

  it("100 signature entries (the valid one last) are refused quickly: the work is bounded", async () => {
    const id = "msg_grammar_8";
    const ts = String(nowS());
    const bad = `v1,${Buffer.alloc(32, 1).toString("base64")}`;
    const sig = [...Array.from({ length: 99 }, () => bad), `v1,${mac(id, ts).toString("base64")}`].join(" ");
    const started = Date.now();
    await refused({ "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig }, "100 entries");
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("non-canonical timestamps (each correctly signed as written): 401", async () => {
    const now = nowS();
    const forms = [`${now}abc`, ` ${now}`, `+${now}`, `${now / 1e9}e9`, `${now}.5`, `0${now}`, `${now * 1000}`, `-${now}`, "", "9".repeat(20)];
    for (const ts of forms) {
      const id = `msg_ts_${forms.indexOf(ts)}`;
      await refused({ "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": `v1,${mac(id, ts).toString("base64")}` }, `ts ${JSON.stringify(ts)}`);
    }
  });

  it("webhook-id with '.', empty, 10 kB long, control or non-ASCII characters (correctly signed): 401", async () => {
    const ts = String(nowS());
    for (const id of ["msg.with.dots", "", "m".repeat(10_000), "msg\tTab", "msg_é"]) {
      const h = { "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": `v1,${mac(id, ts).toString("base64")}` };
      // fetch refuses to send some of these values itself; those never reach the server anyway.
      const a = await post(app, runId("swg"), S.type, text, h).catch(() => null);
      if (a) expect(a.status, JSON.stringify(id.slice(0, 20))).toBe(401);
    }
  });

  it("svix-* header names are not read: signalbox's standard-webhooks scheme takes the webhook-* names only", async () => {
    const h = signSvix(S.secret, text);
    const renamed = Object.fromEntries(Object.entries(h).map(([k, v]) => [k.replace("webhook-", "svix-"), v]));
    await refused(renamed, "svix-*");
  });

  it("scheme downgrade: a valid GitHub-style signature with the same secret and no webhook-* headers: 401", async () => {
    const h = await signGithub(S.secret, text);
    await refused(h, "github header on a standard-webhooks type");
    await refused({ ...signShopify(S.secret, text), ...signSlack(S.secret, text) }, "shopify + slack headers");
  });
});

describe("whsec_ is two different keys: Stripe uses the whole string, Standard Webhooks its base64 body", () => {
  const secret = swSecret(9);
  const text = '{"n":21}';
  beforeAll(async () => {
    await putType(app, "amb-stripe", { auth: { scheme: "stripe", secrets: [secret] }, buffer_ttl_s: 3600 });
    await putType(app, "amb-sw", { auth: { scheme: "standard-webhooks", secrets: [secret] }, buffer_ttl_s: 3600 });
  });

  it("a Stripe header from stripe-node for a stripe type: accepted", async () => {
    const r = await post(app, runId("amb"), "amb-stripe", text, signStripe(secret, text));
    expect(r.status, r.text).toBe(202);
  });
  it("Standard Webhooks headers (base64-decoded key) for the stripe type: 401", async () => {
    await expectRefusedUnchanged(app, () => post(app, runId("amb"), "amb-stripe", text, signStandard(secret, text)));
  });
  it("a Stripe-style MAC keyed with the whole whsec_ string, sent as webhook-signature: 401", async () => {
    const id = "msg_amb";
    const ts = String(nowS());
    const sig = `v1,${createHmac("sha256", secret).update(`${id}.${ts}.${text}`).digest("base64")}`;
    await expectRefusedUnchanged(app, () => post(app, runId("amb"), "amb-sw", text, { "webhook-id": id, "webhook-timestamp": ts, "webhook-signature": sig }));
  });
  it("a Stripe header for the standard-webhooks type: 401", async () => {
    await expectRefusedUnchanged(app, () => post(app, runId("amb"), "amb-sw", text, signStripe(secret, text)));
  });
});

describe("stripe specifics", () => {
  const S = SCHEMES[2]!;
  const text = '{"n":26}';
  const hex = (secret: string, ts: number) => createHmac("sha256", secret).update(`${ts}.${text}`).digest("hex");

  it("two v1 entries during a secret roll (the old one first): accepted", async () => {
    const ts = nowS();
    const r = await post(app, runId("st"), `${S.type}-rot`, text, { "stripe-signature": `t=${ts},v1=${hex("whsec_retired", ts)},v1=${hex(S.secret, ts)}` });
    expect(r.status, r.text).toBe(202);
  });
  it("v0 only, a space after the comma, upper-case hex, t repeated, t missing: 401", async () => {
    const ts = nowS();
    const forms = [
      `t=${ts},v0=${hex(S.secret, ts)}`,
      `t=${ts}, v1=${hex(S.secret, ts)}`,
      `t=${ts},v1=${hex(S.secret, ts).toUpperCase()}`,
      `t=${ts},t=${ts},v1=${hex(S.secret, ts)}`,
      `v1=${hex(S.secret, ts)}`,
    ];
    for (const sig of forms) await expectRefusedUnchanged(app, () => post(app, runId("st"), S.type, text, { "stripe-signature": sig }));
  });
  it("a timestamp an hour in the future (stripe-node would accept it): 401", async () => {
    const ts = nowS() + 3600;
    await expectRefusedUnchanged(app, () => post(app, runId("st"), S.type, text, { "stripe-signature": `t=${ts},v1=${hex(S.secret, ts)}` }));
  });
});

describe("github specifics", () => {
  const S = SCHEMES[3]!;

  it("the documented vector (secret \"It's a Secret to Everybody\", body \"Hello, World!\") verifies: 400 invalid_json, not 401", async () => {
    const r = await post(app, runId("gh"), S.type, "Hello, World!", { "x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17" });
    expect(r.status, r.text).toBe(400);
    expect(r.body).toMatchObject({ outcome: "invalid_json" });
  });
  it("upper-case hex, sha1 only, no sha256= prefix, sha1= in the sha256 header: 401", async () => {
    const text = '{"n":27}';
    const hex = createHmac("sha256", S.secret).update(text).digest("hex");
    const sha1 = createHmac("sha1", S.secret).update(text).digest("hex");
    const forms: Hdrs[] = [
      { "x-hub-signature-256": `sha256=${hex.toUpperCase()}` },
      { "x-hub-signature": `sha1=${sha1}` },
      { "x-hub-signature-256": hex },
      { "x-hub-signature-256": `sha1=${sha1}` },
      { "x-hub-signature-256": `SHA256=${hex}` },
    ];
    for (const h of forms) {
      await expectRefusedUnchanged(app, () => post(app, runId("gh"), S.type, text, h));
    }
  });
});

describe("shopify specifics", () => {
  it("a hex-encoded HMAC instead of base64: 401", async () => {
    const S = SCHEMES[4]!;
    const text = '{"n":28}';
    const h = { "x-shopify-hmac-sha256": createHmac("sha256", S.secret).update(text).digest("hex") };
    await expectRefusedUnchanged(app, () => post(app, runId("sh"), S.type, text, h));
    const url = { "x-shopify-hmac-sha256": createHmac("sha256", S.secret).update(text).digest("base64url") };
    await expectRefusedUnchanged(app, () => post(app, runId("sh"), S.type, text, url));
  });
});

describe("slack specifics", () => {
  const S = SCHEMES[5]!;
  it("the docs vector verifies (frozen time is not injectable over HTTP, so it is stale): 401 stale, and its MAC recomputes", async () => {
    // Slack's published example: recomputing it proves the recipe signSlack follows.
    const body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const h = signSlack("8f742231b10e8888abcd99yyyzzz85a5", body, { ts: 1531420618 });
    expect(h["x-slack-signature"]).toBe("v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503");
    await expectRefusedUnchanged(app, () => post(app, runId("sl"), S.type, body, h));
  });
  it("a v1= prefix with the right MAC: 401", async () => {
    const text = '{"n":29}';
    const h = signSlack(S.secret, text);
    await expectRefusedUnchanged(app, () => post(app, runId("sl"), S.type, text, { ...h, "x-slack-signature": h["x-slack-signature"]!.replace("v0=", "v1=") }));
  });
  it("a correctly signed form-encoded body on a JSON signal: 400 invalid_json (signalbox takes JSON only)", async () => {
    const text = "payload=%7B%22n%22%3A1%7D";
    const r = await post(app, runId("sl"), S.type, text, { ...signSlack(S.secret, text), "content-type": "application/x-www-form-urlencoded" });
    expect(r.status, r.text).toBe(400);
    expect(r.body).toMatchObject({ outcome: "invalid_json" });
  });
});

describe("generic hmac-sha256 specifics", () => {
  const S = SCHEMES[6]!;
  const text = '{"n":30}';
  const hex = () => createHmac("sha256", S.secret).update(text).digest("hex");

  it("accepted: bare hex, upper-case hex, a sha256= prefix (documented for this scheme)", async () => {
    for (const v of [hex(), hex().toUpperCase(), `sha256=${hex()}`]) {
      const r = await post(app, runId("gen"), `${S.type}-rot`, text, { "x-signature": v });
      expect(r.status, `${v}: ${r.text}`).toBe(202);
    }
  });
  it("refused: the wrong header name, a sha1= prefix, base64 instead of hex, a truncated digest", async () => {
    const b64 = createHmac("sha256", S.secret).update(text).digest("base64");
    const forms: Hdrs[] = [{ "x-signature-256": hex() }, { "x-signature": `sha1=${hex()}` }, { "x-signature": b64 }, { "x-signature": hex().slice(0, 62) }];
    for (const h of forms) {
      await expectRefusedUnchanged(app, () => post(app, runId("gen"), S.type, text, h));
    }
  });
});

describe("no enumeration through intake", () => {
  const S = SCHEMES[0]!;
  const text = '{"n":25}';

  it("a run that does not exist, a run with an open wait and a cancelled run all answer a bad signature with the same 401", async () => {
    const open = runId("enum");
    await openWaitFor(app, open, S.type);
    const cancelled = runId("enum");
    await openWaitFor(app, cancelled, S.type);
    expect((await app.api(`/runs/${cancelled}/cancel`, { method: "POST", json: { reason: "test", by: "test" } })).status).toBe(200);
    const bodies = [];
    for (const run of ["never-seen-run", open, cancelled]) {
      bodies.push(unauthBody(await expectRefusedUnchanged(app, () => post(app, run, S.type, text, signStandard(S.other, text)))));
    }
    for (const b of bodies) expect(b).toEqual(bodies[0]);
    // With a valid signature the sender is authenticated, and only then learns the run is cancelled.
    const r = await post(app, cancelled, S.type, text, signStandard(S.secret, text));
    expect(r.status, r.text).toBe(409);
    expect(r.body).toMatchObject({ outcome: "rejected_not_active" });
  });

  it("an unknown signal type: 404 rejected_unknown_signal for any caller (API.md), not recorded for an unauthenticated one", async () => {
    const before = await snapshot(app);
    const r = await post(app, "any-run", "no-such-type", text, signStandard(S.secret, text));
    expect(r.status, r.text).toBe(404);
    expect(r.body).toMatchObject({ outcome: "rejected_unknown_signal" });
    expect(await snapshot(app)).toEqual(before);
  });

  it("a malformed run or signal name (percent-encoded slash, 500 characters, unicode): 400 before anything is looked up", async () => {
    for (const run of ["run/../x", "r".repeat(500), "rün"]) {
      const before = await snapshot(app);
      const r = await post(app, run, S.type, text, signStandard(S.other, text));
      expect(r.status, `${run.slice(0, 20)}: ${r.text}`).toBe(400);
      expect(await snapshot(app)).toEqual(before);
    }
  });
});

describe("the signal log only holds authenticated senders", () => {
  it("after every refusal above, no run's log has an entry that a refused request made", async () => {
    const { items } = await runSignals(app, "never-seen-run");
    expect(items).toEqual([]);
  });
});
