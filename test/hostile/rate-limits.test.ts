import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addressKey, TokenBuckets } from "../../src/http/rate-limit.ts";
import { declareType, openWait, rawRequest } from "../helpers/http.ts";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";

const anonymous = (app: TestApp, run: string, signal: string, headers: Record<string, string> = {}) =>
  rawRequest(app.baseUrl, { method: "POST", path: `/signals/${run}/${signal}`, headers: { "content-type": "application/json", ...headers }, body: '{"ok":true}' });

describe("token buckets", () => {
  it("allow the burst, then the rate, and say how long to wait", () => {
    const buckets = new TokenBuckets({ perS: 2, burst: 4 });
    expect([0, 1, 2, 3].map(() => buckets.take("a", 0))).toEqual([0, 0, 0, 0]);
    expect(buckets.take("a", 0)).toBeCloseTo(0.5);
    expect(buckets.take("b", 0)).toBe(0); // another key has its own
    expect(buckets.take("a", 500)).toBe(0); // one token back after 1/perS
  });

  it("keep at most maxKeys buckets, whatever keys arrive", () => {
    const buckets = new TokenBuckets({ perS: 1, burst: 1 }, 100);
    for (let i = 0; i < 10_000; i++) buckets.take(`addr-${i}`, i);
    expect(buckets.size).toBe(100);
  });
});

describe("the address a client is limited by", () => {
  it("is an IPv6 address's /64 (one host or home holds all of it), an IPv4-mapped one's IPv4 address", () => {
    expect(addressKey("2001:db8:1:2::1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:0DB8:0001:0002:ffff:0:0:1")).toBe("2001:db8:1:2::/64");
    expect(addressKey("2001:db8::")).toBe("2001:db8:0:0::/64");
    expect(addressKey("::1")).toBe("0:0:0:0::/64");
    expect(addressKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(addressKey("::ffff:192.0.2.44")).toBe("192.0.2.44");
    expect(addressKey("::ffff:c000:22c")).toBe("192.0.2.44");
    expect(addressKey("64:ff9b::192.0.2.44")).toBe("64:ff9b:0:0::/64");
    expect(addressKey("192.0.2.44")).toBe("192.0.2.44");
    expect(addressKey("unknown")).toBe("unknown");
  });
});

describe("public endpoints under a flood", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ env: { SIGNALBOX_RATE_LIMIT_PER_ADDRESS: "5", SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: "50", SIGNALBOX_TRUSTED_PROXIES: "127.0.0.1" } });
    await declareType(app, "flooded", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
    await declareType(app, "quiet", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
  });
  afterAll(() => app.close());

  it("one address past its burst gets 429 problem+json with Retry-After; nothing is recorded for it", async () => {
    const client = { "x-forwarded-for": "203.0.113.7" };
    const answers = await Promise.all(Array.from({ length: 30 }, () => anonymous(app, "flood-run", "flooded", client)));
    const limited = answers.filter((a) => a.status === 429);
    const accepted = answers.filter((a) => a.status === 202).length;
    // The burst (twice the rate), and a token more for each 1/5 s the 30 requests took.
    expect(accepted).toBeGreaterThanOrEqual(10);
    expect(accepted).toBeLessThanOrEqual(15);
    expect(limited).toHaveLength(30 - accepted);
    expect(limited[0]!.headers["content-type"]).toMatch(/^application\/problem\+json/);
    expect(Number(limited[0]!.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    expect(JSON.parse(limited[0]!.text)).toMatchObject({ status: 429, title: "Too Many Requests" });
    const recorded = await app.database.sql`select 1 from signalbox.signals where run_id = 'flood-run'`;
    expect(recorded).toHaveLength(accepted);
  });

  it("the addresses of one IPv6 /64 share one limit", async () => {
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => anonymous(app, "v6-run", "flooded", { "x-forwarded-for": `2001:db8:7:7::${(i + 1).toString(16)}` })));
    expect(answers.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(15);
    expect((await anonymous(app, "v6-run", "flooded", { "x-forwarded-for": "2001:db8:7:8::1" })).status).toBe(202); // the next /64
  });

  it("another address is not slowed by the first one's flood; a management caller is never limited", async () => {
    expect((await anonymous(app, "other-run", "flooded", { "x-forwarded-for": "198.51.100.9" })).status).toBe(202);
    const managed = await Promise.all(Array.from({ length: 20 }, () => anonymous(app, "managed-run", "flooded", { "x-forwarded-for": "203.0.113.7", authorization: `Bearer ${API_KEY}` })));
    expect(managed.map((a) => a.status)).toEqual(Array(20).fill(202));
  });

  it("X-Forwarded-For counts only behind a trusted proxy: the client cannot pick its own bucket", async () => {
    const direct = await startTestApp({ env: { SIGNALBOX_RATE_LIMIT_PER_ADDRESS: "5", SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: "0" } });
    try {
      await declareType(direct, "flooded", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
      // A new made-up address on every request: all from 127.0.0.1 all the same.
      const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => anonymous(direct, "xff-run", "flooded", { "x-forwarded-for": `192.0.2.${i}` })));
      expect(answers.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(15);
    } finally {
      await direct.close();
    }
  });

  it("a signal type flooded from many addresses is limited as a whole; other types are not", async () => {
    const spread = await startTestApp({ env: { SIGNALBOX_RATE_LIMIT_PER_ADDRESS: "0", SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: "5", SIGNALBOX_TRUSTED_PROXIES: "127.0.0.1" } });
    try {
      await declareType(spread, "flooded", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
      await declareType(spread, "quiet", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
      const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => anonymous(spread, "spread-run", "flooded", { "x-forwarded-for": `10.9.0.${i}` })));
      expect(answers.filter((a) => a.status === 429).length).toBeGreaterThanOrEqual(20);
      expect((await anonymous(spread, "quiet-run", "quiet", { "x-forwarded-for": "10.8.0.1" })).status).toBe(202);
    } finally {
      await spread.close();
    }
  });

  it("the probes are never limited", async () => {
    const probes = await Promise.all(Array.from({ length: 40 }, () => rawRequest(app.baseUrl, { method: "GET", path: "/healthz", headers: { "x-forwarded-for": "203.0.113.7" } })));
    expect(probes.map((p) => p.status)).toEqual(Array(40).fill(200));
  });

  it("an open wait still gets its signal from a well-behaved sender", async () => {
    const wait = await openWait(app, "fine-run", { signal: "quiet" });
    const sent = await anonymous(app, "fine-run", "quiet", { "x-forwarded-for": "198.51.100.20" });
    expect(JSON.parse(sent.text)).toMatchObject({ outcome: "received", wait_id: wait.body.id });
  });
});
