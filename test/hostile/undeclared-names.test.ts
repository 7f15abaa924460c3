import { createHmac, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Queryable } from "../../src/db/client.ts";
import { SignalTypeCache } from "../../src/signal-types/signal-type-cache.ts";
import { declareType, intake } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

const madeUp = () => `made-up-${randomBytes(8).toString("hex")}`;
/** A database that must not be asked: any use throws. */
const noDatabase = new Proxy({}, { get: () => { throw new Error("the database was asked"); } }) as Queryable;

/**
 * A flood of made-up signal names from many addresses: each must cost nothing (answered from the
 * set of declared names in memory) and all of them together share one per-type budget.
 */
describe("undeclared signal names", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ env: { SIGNALBOX_RATE_LIMIT_PER_ADDRESS: "0", SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: "50" } });
    await declareType(app, "real", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
  });
  afterAll(() => app.close());

  it("share one rate-limit bucket, whatever the names; a declared type keeps its own", async () => {
    expect((await intake(app, "run-1", "real", "{}")).status).toBe(202);
    const answers = await Promise.all(Array.from({ length: 40 }, () => intake(app, "run-1", madeUp(), "{}")));
    const refused = answers.filter((a) => a.status === 429).length;
    const unknown = answers.filter((a) => a.status === 404);
    // One budget for them all: a tenth of a type's for refusals (5/s, burst 10), and a token
    // more for each 1/5 s the requests took. Were each name its own type, all 40 would be 404.
    expect(unknown.length).toBeGreaterThanOrEqual(10);
    expect(unknown.length).toBeLessThan(20);
    expect(refused).toBe(40 - unknown.length);
    expect(unknown[0]!.body).toMatchObject({ outcome: "rejected_unknown_signal" });
    // The declared type was not charged for the made-up names.
    const real = await Promise.all(Array.from({ length: 20 }, () => intake(app, "run-1", "real", "{}")));
    expect(real.map((a) => a.status)).toEqual(Array(20).fill(202));
  });

  it("a type declared on another process is accepted as soon as its NOTIFY arrives, or its set is read again", async () => {
    const other = await startTestApp({ databaseUrl: app.databaseUrl });
    try {
      expect(app.deps.signalTypeCache!.isDeclared("fresh")).toBe(false); // app's set is loaded
      await declareType(other, "fresh", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
      await waitFor("app to accept the type declared on the other process", async () => (await intake(app, "run-2", "fresh", "{}")).status === 202);

      // Even when the NOTIFY is lost, a miss reads the set again once it is a second old.
      const cache = app.deps.signalTypeCache!;
      cache.forget = () => {};
      try {
        await declareType(other, "fresher", { auth: { scheme: "none" }, buffer_ttl_s: 600 });
        await waitFor("app to accept a type whose NOTIFY it missed", async () => (await intake(app, "run-2", "fresher", "{}")).status === 202);
      } finally {
        delete (cache as { forget?: unknown }).forget;
      }
    } finally {
      await other.close();
    }
  });

  it("are grouped from the first request: the set of names is read at start and again after every clear", async () => {
    const other = await startTestApp({ databaseUrl: app.databaseUrl });
    try {
      const cache = other.deps.signalTypeCache!;
      await waitFor("the set of names read at start, before any request", () => cache.isDeclared("real") !== undefined);
      expect(cache.isDeclared("real")).toBe(true);
      expect(cache.isDeclared(madeUp())).toBe(false);
      cache.clear(); // as on a LISTEN reconnect or the database coming back
      await waitFor("the set of names read again after a clear", () => cache.isDeclared("real") !== undefined);
      expect(cache.isDeclared("real")).toBe(true);
    } finally {
      await other.close();
    }
  });

  it("refusals have a budget of their own when configured (0: none)", async () => {
    const open = await startTestApp({
      databaseUrl: app.databaseUrl,
      env: { SIGNALBOX_RATE_LIMIT_PER_ADDRESS: "0", SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: "50", SIGNALBOX_RATE_LIMIT_REFUSALS_PER_SIGNAL_TYPE: "0" },
    });
    try {
      // Within the type's own budget (50/s, burst 100), no refusal is held back.
      const answers = await Promise.all(Array.from({ length: 40 }, () => intake(open, "run-3", madeUp(), "{}")));
      expect(answers.map((a) => a.status)).toEqual(Array(40).fill(404));
    } finally {
      await open.close();
    }
  });

  it("are answered without a database query while the set of names is fresh; a miss reads the set at most once a second", async () => {
    let now = 1_000_000;
    const cache = new SignalTypeCache({ now: () => now });
    expect(await cache.get(app.deps.db, "real")).toMatchObject({ name: "real" });
    const queries = cache.queries;
    for (let i = 0; i < 1_000; i++) expect(await cache.get(noDatabase, madeUp())).toBeUndefined();
    expect(await cache.get(noDatabase, "real")).toMatchObject({ name: "real" });
    expect(cache.queries).toBe(queries);
    expect(cache.isDeclared("real")).toBe(true);
    expect(cache.isDeclared(madeUp())).toBe(false);

    now += 1_001; // the set is older than a second: a miss reads it again, once for all
    const misses = await Promise.all(Array.from({ length: 50 }, () => cache.get(app.deps.db, madeUp())));
    expect(misses.every((m) => m === undefined)).toBe(true);
    expect(cache.queries).toBe(queries + 1);
    expect(await cache.get(noDatabase, madeUp())).toBeUndefined();
    expect(cache.size).toBeLessThanOrEqual(10); // declared names only, never the made-up ones
  });
});

/**
 * Refusals that record nothing (a bad signature, a made-up name) have their own budget per type,
 * a tenth of the type's: past it they are answered as late 429s (a closed-loop flood slows to one
 * request a second per connection), and a sender whose signature is good is never refused.
 */
describe("refusals past a type's budget", () => {
  let app: TestApp;
  const secret = "shpss_flood_secret";
  beforeAll(async () => {
    app = await startTestApp({ env: { SIGNALBOX_RATE_LIMIT_PER_ADDRESS: "0", SIGNALBOX_RATE_LIMIT_PER_SIGNAL_TYPE: "50" } });
    await declareType(app, "signed", { auth: { scheme: "shopify", secrets: [secret], replay_across_runs: true }, buffer_ttl_s: 600 });
    await declareType(app, "open-door", { auth: { scheme: "none" } }); // no buffering: no wait, 409
    await declareType(app, "calm", { auth: { scheme: "shopify", secrets: [secret], replay_across_runs: true }, buffer_ttl_s: 600 });
  });
  afterAll(() => app.close());

  it("bad signatures past the budget get 429; good ones and another type's bad ones are answered as usual", async () => {
    const body = '{"n":1}';
    const forged = { "x-shopify-hmac-sha256": Buffer.alloc(32).toString("base64") };
    const answers = await Promise.all(Array.from({ length: 40 }, () => intake(app, "run-s", "signed", body, forged)));
    const unauthenticated = answers.filter((a) => a.status === 401).length;
    // Refusals: 5/s, burst 10, and one more for each 1/5 s the requests took.
    expect(unauthenticated).toBeGreaterThanOrEqual(10);
    expect(unauthenticated).toBeLessThan(20);
    const limited = answers.filter((a) => a.status === 429);
    expect(limited).toHaveLength(40 - unauthenticated);
    expect(limited[0]!.contentType).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(limited[0]!.text)).toMatchObject({ status: 429, title: "Too Many Requests" });
    // Under the attack, the type's legitimate sender is accepted; another type refuses as usual.
    const good = await Promise.all(Array.from({ length: 5 }, () => intake(app, "run-s", "signed", body, { "x-shopify-hmac-sha256": createHmac("sha256", secret).update(body).digest("base64") })));
    expect(good.map((a) => a.status)).toEqual(Array(5).fill(202));
    expect((await intake(app, "run-s", "calm", body, forged)).status).toBe(401);
  });

  it("recorded rejections past the budget keep their status and signal id (answered late)", async () => {
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => intake(app, `nobody-${i}`, "open-door", "{}")));
    expect(answers.map((a) => a.status)).toEqual(Array(30).fill(409));
    for (const a of answers) expect(a.body).toMatchObject({ outcome: "rejected_not_waiting", signal_id: expect.any(String) });
  });
});
