// Webhook signature verification: every scheme is signed by an independent signer (the vendor
// SDKs, or the documented recipe written inline with node:crypto), then tampered with.
import { createHmac } from "node:crypto";
import { sign as githubSign } from "@octokit/webhooks-methods";
import { Webhook as StandardWebhook } from "standardwebhooks";
import Stripe from "stripe";
import { Webhook as SvixWebhook } from "svix";
import { describe, expect, it } from "vitest";
import { verifySignature } from "../../src/auth/schemes/index.ts";
import type { AuthScheme, SignatureAuth, SignatureHeaders, VerifyResult } from "../../src/auth/schemes/index.ts";

type Pairs = Array<[string, string]>;

/** A header lookup over raw header lines (names case-insensitive, duplicates kept). */
function hdrs(pairs: Pairs): SignatureHeaders {
  return (name) => pairs.filter(([k]) => k.toLowerCase() === name.toLowerCase()).map(([, v]) => v);
}
function bytes(s: string | Buffer): Uint8Array {
  return new Uint8Array(typeof s === "string" ? Buffer.from(s, "utf8") : s);
}
/** verifySignature that records a throw as a test failure instead of propagating it. */
function verify(auth: SignatureAuth, pairs: Pairs, body: string | Uint8Array, now: number): VerifyResult {
  let r: VerifyResult | undefined;
  expect(() => {
    r = verifySignature(auth, hdrs(pairs), typeof body === "string" ? bytes(body) : body, now);
  }).not.toThrow();
  return r as VerifyResult;
}
function expectOk(r: VerifyResult): void {
  expect(r).toMatchObject({ ok: true });
}
function expectFail(r: VerifyResult): void {
  expect(r.ok).toBe(false);
  if (!r.ok) expect(typeof r.reason).toBe("string");
}
function replace(pairs: Pairs, name: string, value: string): Pairs {
  return pairs.map(([k, v]) => (k.toLowerCase() === name ? [k, value] : [k, v]));
}
function without(pairs: Pairs, name: string): Pairs {
  return pairs.filter(([k]) => k.toLowerCase() !== name);
}
function valueOf(pairs: Pairs, name: string): string {
  const p = pairs.find(([k]) => k.toLowerCase() === name);
  if (!p) throw new Error(`no ${name}`);
  return p[1];
}
function hmacHex(key: string, data: string): string {
  return createHmac("sha256", key).update(data, "utf8").digest("hex");
}
function hmacB64(key: string, data: string): string {
  return createHmac("sha256", key).update(data, "utf8").digest("base64");
}

const NOW = 1_700_000_000;
const BODY = '{"event":"order.approved","data":{"run_id":"run_123","approved":true,"amount":4200}}';
// 32-byte and 24-byte keys (the spec allows 24–64), fixed for reproducibility
const SW_SECRET = "whsec_" + Buffer.from(Array.from({ length: 32 }, (_, i) => (i * 31 + 7) & 0xff)).toString("base64");
const SW_SECRET_2 = "whsec_" + Buffer.from(Array.from({ length: 24 }, (_, i) => (i * 59 + 3) & 0xff)).toString("base64");
const stripeClient = new Stripe("sk_test_x");

interface SchemeCase {
  scheme: AuthScheme;
  secret: string;
  otherSecret: string;
  header?: string;
  timestamped: boolean;
  /** Header names the scheme requires. */
  required: string[];
  /** The header carrying the MAC. */
  sigHeader: string;
  sign(secret: string, body: string, ts: number, id?: string): Promise<Pairs>;
}

const swSign = (Impl: typeof StandardWebhook | typeof SvixWebhook) =>
  async (secret: string, body: string, ts: number, id = "msg_2a7bK3xQ9") => [
    ["webhook-id", id],
    ["webhook-timestamp", String(ts)],
    ["webhook-signature", new Impl(secret).sign(id, new Date(ts * 1000), body)],
  ] as Pairs;

const CASES: SchemeCase[] = [
  {
    scheme: "standard-webhooks", secret: SW_SECRET, otherSecret: SW_SECRET_2, timestamped: true,
    required: ["webhook-id", "webhook-timestamp", "webhook-signature"], sigHeader: "webhook-signature",
    sign: swSign(StandardWebhook),
  },
  {
    scheme: "github", secret: "It's a Secret to Everybody", otherSecret: "another secret", timestamped: false,
    required: ["x-hub-signature-256"], sigHeader: "x-hub-signature-256",
    sign: async (secret, body) => [["X-Hub-Signature-256", await githubSign(secret, body)]],
  },
  {
    scheme: "stripe", secret: "whsec_test_secret", otherSecret: "whsec_other_secret", timestamped: true,
    required: ["stripe-signature"], sigHeader: "stripe-signature",
    sign: async (secret, body, ts) => [
      ["Stripe-Signature", stripeClient.webhooks.generateTestHeaderString({ payload: body, secret, timestamp: ts })],
    ],
  },
  {
    scheme: "shopify", secret: "shpss_0123456789abcdef", otherSecret: "shpss_fedcba9876543210", timestamped: false,
    required: ["x-shopify-hmac-sha256"], sigHeader: "x-shopify-hmac-sha256",
    // Shopify: base64(HMAC-SHA256(app secret, raw body))
    sign: async (secret, body) => [["X-Shopify-Hmac-Sha256", hmacB64(secret, body)]],
  },
  {
    scheme: "slack", secret: "8f742231b10e8888abcd99yyyzzz85a5", otherSecret: "0000000000e8888abcd99yyyzzz85a5", timestamped: true,
    required: ["x-slack-request-timestamp", "x-slack-signature"], sigHeader: "x-slack-signature",
    // Slack: "v0=" + hex(HMAC-SHA256(signing secret, "v0:" + ts + ":" + raw body))
    sign: async (secret, body, ts) => [
      ["X-Slack-Request-Timestamp", String(ts)],
      ["X-Slack-Signature", "v0=" + hmacHex(secret, `v0:${ts}:${body}`)],
    ],
  },
  {
    scheme: "hmac-sha256", secret: "generic-secret-1", otherSecret: "generic-secret-2", header: "X-Signature", timestamped: false,
    required: ["x-signature"], sigHeader: "x-signature",
    sign: async (secret, body) => [["X-Signature", hmacHex(secret, body)]],
  },
];

function authFor(c: SchemeCase, secrets: string[], extra: Partial<SignatureAuth> = {}): SignatureAuth {
  return { scheme: c.scheme, secrets, ...(c.header ? { header: c.header } : {}), ...extra };
}

describe.each(CASES)("$scheme: common properties", (c) => {
  const auth = authFor(c, [c.secret]);

  it("accepts a delivery signed by the independent signer", async () => {
    expectOk(verify(auth, await c.sign(c.secret, BODY, NOW), BODY, NOW));
  });

  it("accepts a body with a BOM and multi-byte characters, byte-exactly", async () => {
    const body = "\uFEFF{\"name\":\"Zoë 😀\"}";
    expectOk(verify(auth, await c.sign(c.secret, body, NOW), body, NOW));
  });

  it("rejects a wrong secret", async () => {
    expectFail(verify(auth, await c.sign(c.otherSecret, BODY, NOW), BODY, NOW));
  });

  it("rejects no configured secrets", async () => {
    expectFail(verify(authFor(c, []), await c.sign(c.secret, BODY, NOW), BODY, NOW));
    expectFail(verify(authFor(c, [""]), await c.sign(c.secret, BODY, NOW), BODY, NOW));
  });

  it("accepts rotation: the second configured secret matches", async () => {
    const rotated = authFor(c, [c.otherSecret, c.secret]);
    expectOk(verify(rotated, await c.sign(c.secret, BODY, NOW), BODY, NOW));
    expectOk(verify(rotated, await c.sign(c.otherSecret, BODY, NOW), BODY, NOW));
  });

  it("rejects tampered bodies", async () => {
    const pairs = await c.sign(c.secret, BODY, NOW);
    const flipped = Buffer.from(BODY);
    flipped[10] = (flipped[10] ?? 0) ^ 0x01;
    expectFail(verify(auth, pairs, new Uint8Array(flipped), NOW));
    expectFail(verify(auth, pairs, BODY + "\n", NOW));
    expectFail(verify(auth, pairs, JSON.stringify(JSON.parse(BODY), null, 2), NOW));
    const reordered = '{"data":{"run_id":"run_123","approved":true,"amount":4200},"event":"order.approved"}';
    expect(JSON.parse(reordered)).toEqual(JSON.parse(BODY));
    expectFail(verify(auth, pairs, reordered, NOW));
    expectFail(verify(auth, pairs, "", NOW));
  });

  it("rejects a missing header, each in turn", async () => {
    const pairs = await c.sign(c.secret, BODY, NOW);
    for (const name of c.required) expectFail(verify(auth, without(pairs, name), BODY, NOW));
    expectFail(verify(auth, [], BODY, NOW));
  });

  it("rejects a duplicated header (two values), each in turn, even when both are valid", async () => {
    const pairs = await c.sign(c.secret, BODY, NOW);
    for (const name of c.required) {
      const v = valueOf(pairs, name);
      expectFail(verify(auth, [...pairs, [name, v]], BODY, NOW));
      expectFail(verify(auth, [...pairs, [name.toUpperCase(), "x"]], BODY, NOW));
    }
  });

  it("rejects a comma-merged duplicate signature header", async () => {
    const good = valueOf(await c.sign(c.secret, BODY, NOW), c.sigHeader);
    const bad = valueOf(await c.sign(c.otherSecret, BODY, NOW), c.sigHeader);
    const pairs = await c.sign(c.secret, BODY, NOW);
    expectFail(verify(auth, replace(pairs, c.sigHeader, `${bad}, ${good}`), BODY, NOW));
    expectFail(verify(auth, replace(pairs, c.sigHeader, `${good}, ${bad}`), BODY, NOW));
  });

  it("rejects empty and whitespace-padded signature headers", async () => {
    const pairs = await c.sign(c.secret, BODY, NOW);
    const good = valueOf(pairs, c.sigHeader);
    for (const v of ["", " ", "=", ",", `${good}x`, `x${good}`, good.slice(0, -1), `${good} extra`]) {
      expectFail(verify(auth, replace(pairs, c.sigHeader, v), BODY, NOW));
    }
  });

  it("rejects huge header values without throwing", async () => {
    const pairs = await c.sign(c.secret, BODY, NOW);
    const good = valueOf(pairs, c.sigHeader);
    for (const name of c.required) {
      const v = valueOf(pairs, name);
      expectFail(verify(auth, replace(pairs, name, v + "A".repeat(100_000)), BODY, NOW));
      expectFail(verify(auth, replace(pairs, name, "A".repeat(1_000_000)), BODY, NOW));
    }
    expectFail(verify(auth, replace(pairs, c.sigHeader, `${good} `.repeat(2_000)), BODY, NOW));
  });

  it("never throws on garbage headers", async () => {
    const pairs = await c.sign(c.secret, BODY, NOW);
    const junk = ["\u0000", "\uD800", "v1,\uFFFD", "=".repeat(44), "😀".repeat(50), "t=,v1=", "sha256=", "v0=", "%00", "\r\n"];
    for (const name of c.required) for (const j of junk) expectFail(verify(auth, replace(pairs, name, j), BODY, NOW));
  });

  if (c.timestamped) {
    const tolerated = [NOW - 300, NOW + 300, NOW - 1, NOW + 1];
    const outside = [NOW - 301, NOW + 301, NOW - 86_400, NOW + 3_600, 0];

    it("accepts timestamps just within the default 300 s tolerance, both directions", async () => {
      for (const ts of tolerated) expectOk(verify(auth, await c.sign(c.secret, BODY, ts), BODY, NOW));
    });

    it("rejects stale and future timestamps beyond the tolerance", async () => {
      for (const ts of outside) expectFail(verify(auth, await c.sign(c.secret, BODY, ts), BODY, NOW));
    });

    it("honours a configured tolerance_s", async () => {
      const narrow = authFor(c, [c.secret], { tolerance_s: 10 });
      expectOk(verify(narrow, await c.sign(c.secret, BODY, NOW - 10), BODY, NOW));
      expectFail(verify(narrow, await c.sign(c.secret, BODY, NOW - 11), BODY, NOW));
      expectFail(verify(narrow, await c.sign(c.secret, BODY, NOW + 11), BODY, NOW));
      const wide = authFor(c, [c.secret], { tolerance_s: 3_600 });
      expectOk(verify(wide, await c.sign(c.secret, BODY, NOW - 3_000), BODY, NOW));
    });

    it("fails closed on an unusable tolerance or clock", async () => {
      const pairs = await c.sign(c.secret, BODY, NOW);
      for (const tolerance_s of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
        expectFail(verify(authFor(c, [c.secret], { tolerance_s }), pairs, BODY, NOW));
      }
      expectFail(verify(auth, pairs, BODY, Number.NaN));
    });
  }
});

describe("standard-webhooks", () => {
  const auth: SignatureAuth = { scheme: "standard-webhooks", secrets: [SW_SECRET] };
  const sign = swSign(StandardWebhook);

  it("verifies the spec test vector (security.md §1.9) with a frozen clock", () => {
    const vector: Pairs = [
      ["webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"],
      ["webhook-timestamp", "1614265330"],
      ["webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="],
    ];
    const vAuth: SignatureAuth = { scheme: "standard-webhooks", secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"] };
    expect(verify(vAuth, vector, '{"test": 2432232314}', 1614265330)).toEqual({ ok: true, webhookId: "msg_p5jXN8AQM9LWM0D4loKWxJek" });
    // the same vector one tolerance later is stale
    expectFail(verify(vAuth, vector, '{"test": 2432232314}', 1614265330 + 301));
    expectFail(verify(vAuth, vector, '{"test":2432232314}', 1614265330));
  });

  it("returns the webhook-id on success", async () => {
    expect(verify(auth, await sign(SW_SECRET, BODY, NOW, "msg_abc-123"), BODY, NOW)).toEqual({ ok: true, webhookId: "msg_abc-123" });
  });

  it("accepts deliveries signed by svix", async () => {
    expectOk(verify(auth, await swSign(SvixWebhook)(SW_SECRET, BODY, NOW), BODY, NOW));
  });

  it("accepts a secret configured without the whsec_ prefix", async () => {
    const bare: SignatureAuth = { scheme: "standard-webhooks", secrets: [SW_SECRET.slice("whsec_".length)] };
    expectOk(verify(bare, await sign(SW_SECRET, BODY, NOW), BODY, NOW));
  });

  it("rejects a secret that is not strict base64, without throwing", async () => {
    const pairs = await sign(SW_SECRET, BODY, NOW);
    for (const s of ["whsec_", "whsec_!!!!", "whsec_abc", SW_SECRET + "x", SW_SECRET.replace(/=$/, "")]) {
      expectFail(verify({ scheme: "standard-webhooks", secrets: [s] }, pairs, BODY, NOW));
    }
  });

  it("does not accept a GitHub-style signature made with the same secret (no downgrade)", async () => {
    const key = Buffer.from(SW_SECRET.slice(6), "base64");
    const gh = "sha256=" + createHmac("sha256", key).update(BODY).digest("hex");
    expectFail(verify(auth, [["x-hub-signature-256", gh]], BODY, NOW));
  });

  it("accepts a rotation list with bad and unknown entries around the good one", async () => {
    const good = valueOf(await sign(SW_SECRET, BODY, NOW), "webhook-signature");
    const bad = valueOf(await sign(SW_SECRET_2, BODY, NOW), "webhook-signature");
    const pairs = await sign(SW_SECRET, BODY, NOW);
    const v1a = "v1a," + Buffer.alloc(64, 1).toString("base64");
    expectOk(verify(auth, replace(pairs, "webhook-signature", `${bad} ${good} v2,${good.slice(3)}`), BODY, NOW));
    expectOk(verify(auth, replace(pairs, "webhook-signature", `${v1a} ${good}`), BODY, NOW));
  });

  it("rejects signatures carrying only unknown versions", async () => {
    const pairs = await sign(SW_SECRET, BODY, NOW);
    const b64 = valueOf(pairs, "webhook-signature").slice(3);
    for (const v of [`v2,${b64}`, `V1,${b64}`, `v1a,${b64}`, `v0,${b64}`, `v1 ,${b64}`]) {
      expectFail(verify(auth, replace(pairs, "webhook-signature", v), BODY, NOW));
    }
  });

  it("rejects malformed v1 entries (no lenient decoding)", async () => {
    const pairs = await sign(SW_SECRET, BODY, NOW);
    const b64 = valueOf(pairs, "webhook-signature").slice(3);
    const mac = Buffer.from(b64, "base64");
    // same 32 bytes with non-zero trailing bits (the last sextet carries 4 data bits + 2 padding bits):
    // Buffer.from decodes it to the right MAC, strict decoding must not
    const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const nonCanonical = b64.slice(0, 42) + ALPHABET[ALPHABET.indexOf(b64[42] ?? "A") ^ 1] + "=";
    expect(nonCanonical).not.toBe(b64);
    expect(Buffer.from(nonCanonical, "base64").equals(mac)).toBe(true);
    const malformed = [
      "v1,",
      "v1",
      ",",
      `v1,${b64.slice(0, 43)}`, // missing padding
      `v1,${b64.slice(0, 40)}`, // truncated
      `v1,${b64}=`, // extra padding
      `v1,${b64}AAAA`, // trailing garbage
      `v1,${b64.replace(/\+/g, "-").replace(/\//g, "_")}${/[+/]/.test(b64) ? "" : "-"}`, // base64url alphabet
      `v1,${b64.slice(0, 20)}!!${b64.slice(22)}`, // junk characters
      `v1,${mac.toString("hex")}`, // hex instead of base64
      `v1,${Buffer.concat([mac, Buffer.from([0])]).toString("base64")}`, // 33 bytes
      `v1,${mac.subarray(0, 31).toString("base64")}`, // 31 bytes
      `v1,${nonCanonical}`,
      `v1,${b64},junk`,
      `v1,${b64}  v1,${b64}`, // double space
      ` v1,${b64}`,
      `v1,${b64} `,
      `v1,${b64}\t`,
    ];
    for (const v of malformed) expectFail(verify(auth, replace(pairs, "webhook-signature", v), BODY, NOW));
  });

  it("bounds the number of signature entries", async () => {
    const pairs = await sign(SW_SECRET, BODY, NOW);
    const good = valueOf(pairs, "webhook-signature");
    const bad = valueOf(await sign(SW_SECRET_2, BODY, NOW), "webhook-signature");
    expectFail(verify(auth, replace(pairs, "webhook-signature", `${Array(100).fill(bad).join(" ")} ${good}`), BODY, NOW));
    expectFail(verify(auth, replace(pairs, "webhook-signature", `${Array(16).fill(bad).join(" ")} ${good}`), BODY, NOW));
    expectOk(verify(auth, replace(pairs, "webhook-signature", `${Array(15).fill(bad).join(" ")} ${good}`), BODY, NOW));
  });

  it("rejects an over-long signature header even when it holds a valid entry", async () => {
    const pairs = await sign(SW_SECRET, BODY, NOW);
    const good = valueOf(pairs, "webhook-signature");
    const long = `v2,${"A".repeat(4_100)}=`;
    expectFail(verify(auth, replace(pairs, "webhook-signature", `${long} ${good}`), BODY, NOW));
    expectOk(verify(auth, replace(pairs, "webhook-signature", `v2,${"A".repeat(3_000)}= ${good}`), BODY, NOW));
  });

  it("rejects non-canonical timestamps even when the signature covers them", async () => {
    const id = "msg_ts";
    for (const ts of ["1700000000abc", " 1700000000", "1700000000 ", "+1700000000", "1.7e9", "1700000000.5", "01700000000",
      "1700000000000", "-1700000000", "", "12345678901234567890", "0x6553f100", "１７００００００００"]) {
      // sign the exact string by hand so only the timestamp grammar can reject it
      const key = Buffer.from(SW_SECRET.slice(6), "base64");
      const sig = "v1," + createHmac("sha256", key).update(`${id}.${ts}.${BODY}`).digest("base64");
      expectFail(verify(auth, [["webhook-id", id], ["webhook-timestamp", ts], ["webhook-signature", sig]], BODY, NOW));
    }
  });

  it("rejects malformed webhook-ids even when signed", async () => {
    const key = Buffer.from(SW_SECRET.slice(6), "base64");
    for (const id of ["", "msg.1", "msg 1", "msg\u0001", "msg_é", "x".repeat(10_000)]) {
      const sig = "v1," + createHmac("sha256", key).update(`${id}.${NOW}.${BODY}`).digest("base64");
      expectFail(verify(auth, [["webhook-id", id], ["webhook-timestamp", String(NOW)], ["webhook-signature", sig]], BODY, NOW));
    }
  });

  it("rejects a replay with a fresh webhook-id but the old signature (the id is signed)", async () => {
    const pairs = await sign(SW_SECRET, BODY, NOW, "msg_original");
    expectFail(verify(auth, replace(pairs, "webhook-id", "msg_fresh"), BODY, NOW));
  });

  it("rejects a re-timestamped replay with the old signature", async () => {
    const pairs = await sign(SW_SECRET, BODY, NOW - 200);
    expectFail(verify(auth, replace(pairs, "webhook-timestamp", String(NOW)), BODY, NOW));
  });

  it("verifies over raw bytes: invalid UTF-8 body signed by hand", () => {
    const raw = Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]); // BOM {"a":"\xFF"}
    const key = Buffer.from(SW_SECRET.slice(6), "base64");
    const sig = "v1," + createHmac("sha256", key).update(`msg_raw.${NOW}.`).update(raw).digest("base64");
    const pairs: Pairs = [["webhook-id", "msg_raw"], ["webhook-timestamp", String(NOW)], ["webhook-signature", sig]];
    expectOk(verify(auth, pairs, new Uint8Array(raw), NOW));
    // what a UTF-8 round trip would have produced must not verify
    expectFail(verify(auth, pairs, bytes(new TextDecoder().decode(raw)), NOW));
  });

  it("treats the same whsec_ string as a different key than Stripe does", async () => {
    const stripeHeader = stripeClient.webhooks.generateTestHeaderString({ payload: BODY, secret: SW_SECRET, timestamp: NOW });
    expectFail(verify(auth, [["stripe-signature", stripeHeader]], BODY, NOW));
    expectOk(verify({ scheme: "stripe", secrets: [SW_SECRET] }, [["stripe-signature", stripeHeader]], BODY, NOW));
    expectFail(verify({ scheme: "stripe", secrets: [SW_SECRET] }, await sign(SW_SECRET, BODY, NOW), BODY, NOW));
  });
});

describe("github", () => {
  const auth: SignatureAuth = { scheme: "github", secrets: ["It's a Secret to Everybody"] };
  const VECTOR = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

  it("verifies the GitHub docs vector", () => {
    expect(verify(auth, [["x-hub-signature-256", VECTOR]], "Hello, World!", NOW)).toEqual({ ok: true });
    expect(verify(auth, [["x-hub-signature-256", VECTOR]], "Hello, World!", 0)).toEqual({ ok: true }); // no timestamp
  });

  it("rejects malformed signatures", () => {
    const hex = VECTOR.slice(7);
    for (const v of [hex, `SHA256=${hex}`, `sha256=${hex.toUpperCase()}`, `sha1=${hex.slice(0, 40)}`, `sha256=${hex.slice(0, 63)}`,
      `sha256=${hex}0`, `sha256=${hex}00`, `sha256=${hex.slice(0, 62)}zz`, "sha256=", `sha256= ${hex}`, `sha256=${Buffer.from(hex, "hex").toString("base64")}`]) {
      expectFail(verify(auth, [["x-hub-signature-256", v]], "Hello, World!", NOW));
    }
  });

  it("ignores the legacy sha1 header", () => {
    const sha1 = "sha1=" + createHmac("sha1", "It's a Secret to Everybody").update("Hello, World!").digest("hex");
    expectFail(verify(auth, [["x-hub-signature", sha1]], "Hello, World!", NOW));
  });
});

describe("stripe", () => {
  const auth: SignatureAuth = { scheme: "stripe", secrets: ["whsec_test_secret"] };
  const VECTOR = "t=1700000000,v1=248a374f50f943a28b0f6ab50faf9a7e7e29b710fa26df9fb1618b9bf8ea9c9a";
  const header = (payload: string, ts = NOW, secret = "whsec_test_secret") =>
    stripeClient.webhooks.generateTestHeaderString({ payload, secret, timestamp: ts });

  it("verifies the deterministic vector (security.md §2.2)", () => {
    expect(verify(auth, [["stripe-signature", VECTOR]], '{"id":"evt_1"}', 1700000000)).toEqual({ ok: true });
  });

  it("accepts the static Stripe.webhooks signer too", () => {
    const h = Stripe.webhooks.generateTestHeaderString({ payload: BODY, secret: "whsec_test_secret", timestamp: NOW });
    expectOk(verify(auth, [["stripe-signature", h]], BODY, NOW));
  });

  it("accepts several v1 signatures during a secret roll, and a v0 alongside", () => {
    const good = header(BODY).split(",v1=")[1];
    const other = header(BODY, NOW, "whsec_other").split(",v1=")[1];
    expectOk(verify(auth, [["stripe-signature", `t=${NOW},v1=${other},v1=${good}`]], BODY, NOW));
    expectOk(verify(auth, [["stripe-signature", `t=${NOW},v1=${good},v0=${other}`]], BODY, NOW));
    expectOk(verify(auth, [["stripe-signature", `v1=${good},t=${NOW}`]], BODY, NOW));
  });

  it("rejects malformed headers", () => {
    const good = header(BODY).split(",v1=")[1] ?? "";
    for (const v of [
      `t=${NOW},v0=${good}`, // v0 only
      `t=${NOW}, v1=${good}`, // space after comma
      `v1=${good}`, // no t
      `t=${NOW},t=${NOW},v1=${good}`, // repeated t
      `t=,v1=${good}`,
      `t=${NOW}abc,v1=${good}`,
      `t=${NOW}.0,v1=${good}`,
      `t=-${NOW},v1=${good}`,
      `t=${NOW},v1=${good.toUpperCase()}`,
      `t=${NOW},v1=${good.slice(0, 63)}`,
      `t=${NOW},v1=${good}0`,
      `t=${NOW},v1=`,
      `t=${NOW},v1=${good},`,
      `t=${NOW},,v1=${good}`,
      `t=${NOW},v1==${good}`,
      `t=${NOW},v1=${good}=`,
      `t=${NOW},v1=${Buffer.from(good, "hex").toString("base64")}`,
      `T=${NOW},v1=${good}`,
      `t=${NOW},${Array(20).fill(`v1=${good}`).join(",")}`, // too many items
    ]) {
      expectFail(verify(auth, [["stripe-signature", v]], BODY, NOW));
    }
  });

  it("ignores unknown schemes but bounds the header length", () => {
    const h = header(BODY);
    expectOk(verify(auth, [["stripe-signature", `${h},v9=${"a".repeat(3_000)}`]], BODY, NOW));
    expectFail(verify(auth, [["stripe-signature", `${h},v9=${"a".repeat(5_000)}`]], BODY, NOW));
  });

  it("does not base64-decode the whsec_ secret", () => {
    const key = Buffer.from("test_secret", "base64");
    const sig = createHmac("sha256", key).update(`${NOW}.${BODY}`).digest("hex");
    expectFail(verify(auth, [["stripe-signature", `t=${NOW},v1=${sig}`]], BODY, NOW));
  });

  it("rejects a re-timestamped replay", () => {
    const old = header(BODY, NOW - 1000);
    expectFail(verify(auth, [["stripe-signature", old.replace(`t=${NOW - 1000}`, `t=${NOW}`)]], BODY, NOW));
  });
});

describe("shopify", () => {
  const secret = "shpss_0123456789abcdef";
  const auth: SignatureAuth = { scheme: "shopify", secrets: [secret] };

  it("rejects a hex-encoded HMAC and malformed base64", () => {
    const b64 = hmacB64(secret, BODY);
    const mac = Buffer.from(b64, "base64");
    for (const v of [hmacHex(secret, BODY), b64.slice(0, 43), `${b64}=`, `${b64}AAAA`, b64.replace(/[+/]/g, "-") + (/[+/]/.test(b64) ? "" : "_"),
      `${b64.slice(0, 10)}!!${b64.slice(12)}`, mac.subarray(0, 31).toString("base64"), Buffer.concat([mac, mac]).toString("base64"),
      `sha256=${b64}`, ` ${b64}`]) {
      expectFail(verify(auth, [["x-shopify-hmac-sha256", v]], BODY, NOW));
    }
  });

  it("signs nothing but the body: unsigned headers do not matter", () => {
    const pairs: Pairs = [["x-shopify-hmac-sha256", hmacB64(secret, BODY)], ["x-shopify-topic", "orders/create"]];
    expectOk(verify(auth, pairs, BODY, NOW));
    expectOk(verify(auth, replace(pairs, "x-shopify-topic", "app/uninstalled"), BODY, NOW));
  });
});

describe("slack", () => {
  const secret = "8f742231b10e8888abcd99yyyzzz85a5";
  const auth: SignatureAuth = { scheme: "slack", secrets: [secret] };
  const VECTOR_BODY = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
  const vector: Pairs = [
    ["X-Slack-Request-Timestamp", "1531420618"],
    ["X-Slack-Signature", "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"],
  ];

  it("verifies the Slack docs vector with a frozen clock", () => {
    expect(verify(auth, vector, VECTOR_BODY, 1531420618)).toEqual({ ok: true });
    expectFail(verify(auth, vector, VECTOR_BODY, 1531420618 + 301));
  });

  it("rejects malformed signatures and timestamps", () => {
    const hex = "a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
    for (const v of [`v1=${hex}`, hex, `V0=${hex}`, `v0=${hex.toUpperCase()}`, `v0=${hex.slice(1)}`, `v0=${hex}0`, "v0=", `v0=${hex.slice(0, 62)}gg`]) {
      expectFail(verify(auth, replace(vector, "x-slack-signature", v), VECTOR_BODY, 1531420618));
    }
    for (const ts of ["1531420618abc", " 1531420618", "1531420618.0", "", "01531420618"]) {
      const sig = "v0=" + hmacHex(secret, `v0:${ts}:${VECTOR_BODY}`);
      expectFail(verify(auth, [["x-slack-request-timestamp", ts], ["x-slack-signature", sig]], VECTOR_BODY, 1531420618));
    }
  });
});

describe("hmac-sha256", () => {
  const secret = "generic-secret-1";
  const auth: SignatureAuth = { scheme: "hmac-sha256", secrets: [secret], header: "X-Signature" };

  it("accepts lower-case, upper-case and sha256=-prefixed hex", () => {
    const hex = hmacHex(secret, BODY);
    for (const v of [hex, hex.toUpperCase(), `sha256=${hex}`, `sha256=${hex.toUpperCase()}`]) {
      expectOk(verify(auth, [["x-signature", v]], BODY, NOW));
    }
  });

  it("rejects a wrong header name, wrong prefix, base64 and malformed hex", () => {
    const hex = hmacHex(secret, BODY);
    expectFail(verify(auth, [["x-signature-256", hex]], BODY, NOW));
    for (const v of [`sha1=${hex}`, `SHA256=${hex}`, `v0=${hex}`, `sha256:${hex}`, hmacB64(secret, BODY), hex.slice(0, 63), `${hex}0`,
      `${hex.slice(0, 62)}zz`, `sha256=sha256=${hex}`, ` ${hex}`]) {
      expectFail(verify(auth, [["x-signature", v]], BODY, NOW));
    }
  });

  it("fails closed when no usable header is configured", () => {
    const hex = hmacHex(secret, BODY);
    expectFail(verify({ scheme: "hmac-sha256", secrets: [secret] }, [["x-signature", hex]], BODY, NOW));
    expectFail(verify({ scheme: "hmac-sha256", secrets: [secret], header: "" }, [["x-signature", hex]], BODY, NOW));
    expectFail(verify({ scheme: "hmac-sha256", secrets: [secret], header: "x signature" }, [["x signature", hex]], BODY, NOW));
  });
});

describe("none and malformed configuration", () => {
  it("none accepts without headers", () => {
    expect(verify({ scheme: "none", secrets: [] }, [], BODY, NOW)).toEqual({ ok: true });
  });

  it("never throws on malformed arguments", () => {
    const body = bytes(BODY);
    const good = hdrs([["x-signature", hmacHex("s", BODY)]]);
    const calls: Array<() => VerifyResult> = [
      () => verifySignature(null as unknown as SignatureAuth, good, body, NOW),
      () => verifySignature({ scheme: "bogus" } as unknown as SignatureAuth, good, body, NOW),
      () => verifySignature({ scheme: "bogus", secrets: ["s"] } as unknown as SignatureAuth, good, body, NOW),
      () => verifySignature({ scheme: "github", secrets: "s" } as unknown as SignatureAuth, good, body, NOW),
      () => verifySignature({ scheme: "github", secrets: [42, null] } as unknown as SignatureAuth, hdrs([["x-hub-signature-256", "sha256=" + "0".repeat(64)]]), body, NOW),
      () => verifySignature({ scheme: "standard-webhooks", secrets: [42] } as unknown as SignatureAuth, good, body, NOW),
      () => verifySignature({ scheme: "hmac-sha256", secrets: ["s"], header: 7 } as unknown as SignatureAuth, good, body, NOW),
      () => verifySignature({ scheme: "hmac-sha256", secrets: ["s"], header: "x-signature" }, good, BODY as unknown as Uint8Array, NOW),
      () => verifySignature({ scheme: "hmac-sha256", secrets: ["s"], header: "x-signature" }, null as unknown as SignatureHeaders, body, NOW),
      () => verifySignature({ scheme: "hmac-sha256", secrets: ["s"], header: "x-signature" }, () => { throw new Error("boom"); }, body, NOW),
      () => verifySignature({ scheme: "hmac-sha256", secrets: ["s"], header: "x-signature" }, (() => undefined) as unknown as SignatureHeaders, body, NOW),
      () => verifySignature({ scheme: "hmac-sha256", secrets: ["s"], header: "x-signature" }, (() => [undefined]) as unknown as SignatureHeaders, body, NOW),
      () => verifySignature({ scheme: "stripe", secrets: ["s"] }, good, body, "now" as unknown as number),
    ];
    for (const call of calls) {
      expect(call).not.toThrow();
      expect(call().ok).toBe(false);
    }
    // sanity: the well-formed variant of the last hmac-sha256 call passes
    expectOk(verifySignature({ scheme: "hmac-sha256", secrets: ["s"], header: "x-signature" }, good, body, NOW));
  });

  it("never throws on random header values for any scheme (deterministic fuzz)", () => {
    let seed = 42;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    const alphabet = "abcdefv01=,. +/-_tT\u0000😀\uD800whsec_sha256";
    const randomString = () => Array.from({ length: Math.floor(rnd() * 120) }, () => alphabet[Math.floor(rnd() * alphabet.length)]).join("");
    for (const c of CASES) {
      const auth = authFor(c, [c.secret]);
      for (let i = 0; i < 200; i++) {
        const pairs: Pairs = c.required.map((n) => [n, randomString()]);
        expectFail(verify(auth, pairs, BODY, NOW));
      }
    }
  });
});
