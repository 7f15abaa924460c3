// Replay protection: the signed webhook-id (standard-webhooks) is accepted once per signal type,
// across runs; schemes that sign no id bind a delivery to its run through auth.run_pointer.
// security.md §6: #12–#17 (and the run binding of §3.6).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";
import { advanceClock, withProcessClockAhead } from "../helpers/clock.ts";
import { claimWebhookId, purgeExpiredReceipts } from "../../src/signals/signals.queries.ts";
import { expectRefusedUnchanged, type Hdrs, nowS, openWaitFor, post, putType, runSignals, signGeneric, signGithub, signShopify, signStandard, snapshot, swSecret, waitStatus } from "./support.ts";

const SW = swSecret(5);

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await putType(app, "sw", { auth: { scheme: "standard-webhooks", secrets: [SW], tolerance_s: 60 }, schema: { type: "object", required: ["ok"] } });
  await putType(app, "sw-buf", { auth: { scheme: "standard-webhooks", secrets: [SW], tolerance_s: 60 }, buffer_ttl_s: 3600 });
  await putType(app, "sw-short", { auth: { scheme: "standard-webhooks", secrets: [SW], tolerance_s: 1 }, buffer_ttl_s: 3600 });
});
afterAll(async () => {
  await app?.close();
});

let n = 0;
const run = (p: string) => `${p}-${++n}`;
const countFor = async (runId: string) => (await runSignals(app, runId)).items.length;

describe("standard-webhooks: one webhook-id, one run", () => {
  it("the exact request again to the same run: 200 duplicate repeating the first answer; still one signal", async () => {
    const r1 = run("same");
    const waitId = await openWaitFor(app, r1, "sw");
    const body = '{"ok":true}';
    const h = signStandard(SW, body);
    const first = await post(app, r1, "sw", body, h);
    expect(first.status, first.text).toBe(202);
    const again = await post(app, r1, "sw", body, h);
    expect(again.status, again.text).toBe(200);
    expect(again.body).toEqual({ ...first.body, outcome: "duplicate" });
    expect(await countFor(r1)).toBe(1);
    expect(await waitStatus(app, waitId)).toBe("received");

    // A later wait of the same name in that run is not resolved by the replay.
    const next = await openWaitFor(app, r1, "sw");
    const third = await post(app, r1, "sw", body, h);
    expect(third.status).toBe(200);
    expect(third.body).toMatchObject({ outcome: "duplicate", signal_id: first.body.signal_id });
    expect(await waitStatus(app, next)).toBe("waiting");
    expect(await countFor(r1)).toBe(1);
  });

  it("an unsigned Idempotency-Key header does not turn a replay into a new signal (the signed id is the key)", async () => {
    const r1 = run("idem");
    await openWaitFor(app, r1, "sw");
    const body = '{"ok":true}';
    const h = signStandard(SW, body);
    expect((await post(app, r1, "sw", body, h)).status).toBe(202);
    const next = await openWaitFor(app, r1, "sw");
    const replay = await post(app, r1, "sw", body, { ...h, "idempotency-key": "attacker-chosen-key" });
    expect(replay.status, replay.text).toBe(200);
    expect(replay.body).toMatchObject({ outcome: "duplicate" });
    expect(await waitStatus(app, next)).toBe("waiting");
    expect(await countFor(r1)).toBe(1);
  });

  it("the old signature with a fresh webhook-id: 401 (the id is signed)", async () => {
    const r1 = run("fresh-id");
    await openWaitFor(app, r1, "sw");
    const body = '{"ok":true}';
    const h = signStandard(SW, body);
    expect((await post(app, r1, "sw", body, h)).status).toBe(202);
    await openWaitFor(app, r1, "sw");
    await expectRefusedUnchanged(app, () => post(app, r1, "sw", body, { ...h, "webhook-id": "msg_brand_new" }));
  });

  it("the sender's retry (same id, new timestamp and signature): 200 duplicate, one signal", async () => {
    const r1 = run("retry");
    await openWaitFor(app, r1, "sw");
    const body = '{"ok":true}';
    const id = `msg_retry_${n}`;
    expect((await post(app, r1, "sw", body, signStandard(SW, body, { id, ts: nowS() - 30 }))).status).toBe(202);
    const retry = await post(app, r1, "sw", body, signStandard(SW, body, { id, ts: nowS() }));
    expect(retry.status, retry.text).toBe(200);
    expect(retry.body).toMatchObject({ outcome: "duplicate" });
    expect(await countFor(r1)).toBe(1);
  });

  it("20 identical requests at once: exactly one 202, nineteen 200 duplicate, one signal", async () => {
    const r1 = run("burst");
    await openWaitFor(app, r1, "sw");
    const body = '{"ok":true}';
    const h = signStandard(SW, body);
    const answers = await Promise.all(Array.from({ length: 20 }, () => post(app, r1, "sw", body, h)));
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses).toEqual([200, ...Array(18).fill(200), 202].sort());
    const ids = new Set(answers.map((a) => a.body.signal_id));
    expect(ids.size).toBe(1);
    expect(await countFor(r1)).toBe(1);
  });

  it("the same request to 10 runs at once: exactly one run gets it, the other nine 401 with nothing written", async () => {
    const runs = Array.from({ length: 10 }, () => run("race"));
    const waits = await Promise.all(runs.map((r) => openWaitFor(app, r, "sw")));
    const body = '{"ok":true}';
    const h = signStandard(SW, body);
    const answers = await Promise.all(runs.map((r) => post(app, r, "sw", body, h)));
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 401)).toHaveLength(9);
    const statuses = await Promise.all(waits.map((w) => waitStatus(app, w)));
    expect(statuses.filter((s) => s === "received")).toHaveLength(1);
    const counts = await Promise.all(runs.map(countFor));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(1);
  });

  it("an accepted message replayed after its window (timestamp now stale): 401, not duplicate", async () => {
    const r1 = run("stale");
    const body = '{"ok":true}';
    const ts = nowS();
    const h = signStandard(SW, body, { ts });
    expect((await post(app, r1, "sw-short", body, h)).status).toBe(202);
    await withProcessClockAhead(2, () => expectRefusedUnchanged(app, () => post(app, r1, "sw-short", body, h))); // past the window
  });

  // The signature's check reads whole seconds, bounds included: a delivery dated a tolerance
  // ahead still verifies up to a second after 2 × tolerance from its first claim. Its receipt was
  // kept only 2 × tolerance, so the sweep could purge it while a replay to another run verified.
  it("a receipt outlives the last moment its delivery verifies: replayed to another run then, after the sweep, 401", async () => {
    const at = (Math.floor(Date.now() / 1000) + 1) * 1000; // on a whole second, as any request may be
    const body = '{"ok":true}';
    const h = signStandard(SW, body, { ts: at / 1000 + 1 }); // the sender's clock a tolerance (1 s) ahead
    const first = await withProcessClockAhead((at - Date.now()) / 1000, () => post(app, run("edge-a"), "sw-short", body, h));
    expect(first.status, first.text).toBe(202);
    await advanceClock(app, 2.1);
    await purgeExpiredReceipts(app.deps.db);
    // The process's clock reads ts + tolerance (whole seconds): the delivery still verifies.
    const replay = await withProcessClockAhead((at + 2100 - Date.now()) / 1000, () => post(app, run("edge-b"), "sw-short", body, h));
    expect(replay.status, `replay to another run: ${replay.text}`).toBe(401);
  });

  describe("cross-run replay is refused and writes nothing", () => {
    it("an accepted delivery replayed to another run that has an open wait: 401; that wait stays waiting", async () => {
      const a = run("cross-a");
      const b = run("cross-b");
      await openWaitFor(app, a, "sw");
      const waitB = await openWaitFor(app, b, "sw");
      const body = '{"ok":true}';
      const h = signStandard(SW, body);
      expect((await post(app, a, "sw", body, h)).status).toBe(202);
      const refused = await expectRefusedUnchanged(app, () => post(app, b, "sw", body, h));
      expect(refused.body).toMatchObject({ outcome: "rejected_unauthenticated" });
      expect(await waitStatus(app, waitB)).toBe("waiting");
      expect(await countFor(b)).toBe(0);
    });

    it("a buffered delivery replayed to another run: 401, nothing buffered there", async () => {
      const a = run("cross-buf-a");
      const b = run("cross-buf-b");
      const body = '{"x":1}';
      const h = signStandard(SW, body);
      expect((await post(app, a, "sw-buf", body, h)).body).toMatchObject({ outcome: "buffered" });
      await expectRefusedUnchanged(app, () => post(app, b, "sw-buf", body, h));
      expect(await countFor(b)).toBe(0);
    });

    it("a delivery the first run refused (no open wait; 409) still belongs to that run: replayed elsewhere it is 401", async () => {
      const a = run("cross-nw-a");
      const b = run("cross-nw-b");
      await openWaitFor(app, b, "sw");
      const body = '{"ok":true}';
      const h = signStandard(SW, body);
      expect((await post(app, a, "sw", body, h)).body).toMatchObject({ outcome: "rejected_not_waiting" });
      await expectRefusedUnchanged(app, () => post(app, b, "sw", body, h));
      // ...and the legitimate retry to its own run, once a wait is open, is received.
      await openWaitFor(app, a, "sw");
      expect((await post(app, a, "sw", body, signStandard(SW, body, { id: h["webhook-id"] }))).body).toMatchObject({ outcome: "received" });
    });

    it("a delivery refused for its payload (422) or as not JSON (400) is not recorded against another run either", async () => {
      for (const body of ['{"not_ok":true}', "not json"]) {
        const a = run("cross-bad-a");
        const b = run("cross-bad-b");
        await openWaitFor(app, b, "sw");
        const h = signStandard(SW, body);
        const first = await post(app, a, "sw", body, h);
        expect([400, 422]).toContain(first.status);
        expect(await countFor(a)).toBe(1); // authenticated: recorded where it was sent
        await expectRefusedUnchanged(app, () => post(app, b, "sw", body, h));
        expect(await countFor(b)).toBe(0);
      }
    });

    it("a sender's retry that comes late in the first claim's window: its capture replayed to another run once that claim's time is up is 401", async () => {
      const a = run("late-retry-a");
      const b = run("late-retry-b");
      await openWaitFor(app, a, "sw");
      const waitB = await openWaitFor(app, b, "sw");
      const body = '{"ok":true}';
      const id = `msg_late_${n}`;
      expect((await post(app, a, "sw", body, signStandard(SW, body, { id }))).status).toBe(202);
      // 90 s later (tolerance 60: the first claim is kept 120 s) the sender retries, freshly signed.
      await advanceClock(app, 90);
      const retry = signStandard(SW, body, { id });
      expect((await post(app, a, "sw", body, retry)).body).toMatchObject({ outcome: "duplicate" });
      // 40 s on, the first claim's time is up and the sweep purges what expired; the retry's
      // signature still verifies for another 20 s.
      await advanceClock(app, 40);
      await purgeExpiredReceipts(app.deps.db);
      await expectRefusedUnchanged(app, () => post(app, b, "sw", body, retry));
      expect(await waitStatus(app, waitB)).toBe("waiting");
    });

    it("a management token may send the same body to any run (it is not replay-bound)", async () => {
      const body = '{"ok":true}';
      for (const r of [run("mgmt"), run("mgmt")]) {
        await openWaitFor(app, r, "sw");
        const a = await post(app, r, "sw", body, { authorization: `Bearer ${API_KEY}` });
        expect(a.status, a.text).toBe(202);
      }
    });
  });
});

describe("standard-webhooks: raising a type's tolerance reopens no capture", () => {
  const raised = { scheme: "standard-webhooks", secrets: [SW], tolerance_s: 3600 };
  const declare = (name: string, tolerance_s: number) => putType(app, name, { auth: { ...raised, tolerance_s }, buffer_ttl_s: 3600 });

  it("a capture whose receipt was purged under the old tolerance: 401 to another run after the raise", async () => {
    await declare("sw-raise-old", 60);
    const [a, b] = [run("raise-old-a"), run("raise-old-b")];
    const body = '{"ok":true}';
    const h = signStandard(SW, body, { id: `msg_raise_old_${n}` });
    expect((await post(app, a, "sw-raise-old", body, h)).status).toBe(202);
    // 130 s on (the receipt was kept 120 s), the sweep purged it; then the tolerance goes to an hour.
    await advanceClock(app, 130);
    await purgeExpiredReceipts(app.deps.db);
    await withProcessClockAhead(130, async () => {
      await declare("sw-raise-old", 3600);
      await expectRefusedUnchanged(app, () => post(app, b, "sw-raise-old", body, h));
    });
  });

  it("a capture accepted just before the raise stays claimed for the new window; its sender's copies still verify", async () => {
    await declare("sw-raise-new", 60);
    const [a, b] = [run("raise-new-a"), run("raise-new-b")];
    const waitB = await openWaitFor(app, b, "sw-raise-new");
    const body = '{"ok":true}';
    const h = signStandard(SW, body, { id: `msg_raise_new_${n}` });
    expect((await post(app, a, "sw-raise-new", body, h)).status).toBe(202);
    await withProcessClockAhead(30, () => declare("sw-raise-new", 3600));
    // 200 s on: under the old tolerance its receipt would have been purged at 120 s.
    await advanceClock(app, 200);
    await purgeExpiredReceipts(app.deps.db);
    await withProcessClockAhead(230, async () => {
      await expectRefusedUnchanged(app, () => post(app, b, "sw-raise-new", body, h));
      expect((await post(app, a, "sw-raise-new", body, h)).body).toMatchObject({ outcome: "duplicate" });
    });
    expect(await waitStatus(app, waitB)).toBe("waiting");
  });

  it("a receipt is kept for the tolerance as declared now, whatever the claiming process had cached", async () => {
    await declare("sw-raise-cached", 3600);
    await claimWebhookId(app.deps.db, "sw-raise-cached", "msg_cached", run("cached"), 2 * 60);
    const [row] = await app.database.sql<{ s: number }[]>`select extract(epoch from expires_at - now())::int as s from signalbox.webhook_receipts where signal_type = 'sw-raise-cached'`;
    expect(row!.s).toBeGreaterThan(7000);
  });

  it.each([
    ["moved to another scheme and back", async (name: string) => {
      await putType(app, name, { auth: { scheme: "stripe", secrets: ["whsec_stripe"], tolerance_s: 3600, replay_across_runs: true }, buffer_ttl_s: 3600 });
      await declare(name, 3600);
    }],
    ["deleted and declared again", async (name: string) => {
      expect((await app.api(`/signal-types/${name}`, { method: "DELETE" })).status).toBeLessThan(300);
      await declare(name, 3600);
    }],
  ])("a capture whose receipt was purged: 401 to another run once the type is %s with a wider tolerance", async (_how, redeclare) => {
    const name = `sw-again-${n}`;
    await declare(name, 60);
    const [a, b] = [run("again-a"), run("again-b")];
    const body = '{"ok":true}';
    const h = signStandard(SW, body, { id: `msg_again_${n}` });
    expect((await post(app, a, name, body, h)).status).toBe(202);
    await advanceClock(app, 130);
    await purgeExpiredReceipts(app.deps.db);
    await withProcessClockAhead(130, async () => {
      await redeclare(name);
      await expectRefusedUnchanged(app, () => post(app, b, name, body, h));
    });
  });

  it("the floor is kept in the declaration, never shown", async () => {
    await declare("sw-shown", 60);
    await declare("sw-shown", 3600);
    const [row] = await app.database.sql<{ auth: Record<string, unknown> }[]>`select auth from signalbox.signal_types where name = 'sw-shown'`;
    expect(row!.auth).toHaveProperty("replay_floor_s");
    const shown = await (await app.api("/signal-types/sw-shown")).text();
    expect(shown).not.toContain("floor");
    const listed = await (await app.api("/signal-types")).text();
    expect(listed).not.toContain("floor");
  });
});

describe("run binding (auth.run_pointer) for schemes that sign no id", () => {
  const BOUND: Array<{ type: string; auth: Record<string, unknown>; sign(body: string): Hdrs | Promise<Hdrs>; payload(run: unknown): string }> = [
    { type: "gh-bound", auth: { scheme: "github", secrets: ["gh-secret"], run_pointer: "/metadata/run_id" }, sign: (b) => signGithub("gh-secret", b), payload: (r) => JSON.stringify({ action: "approved", metadata: { run_id: r } }) },
    { type: "shop-bound", auth: { scheme: "shopify", secrets: ["shop-secret"], run_pointer: "/run" }, sign: (b) => signShopify("shop-secret", b), payload: (r) => JSON.stringify({ run: r, total: "1.00" }) },
    { type: "gen-bound", auth: { scheme: "hmac-sha256", header: "X-Sig", secrets: ["gen-secret"], run_pointer: "/a~1b/m~0n" }, sign: (b) => signGeneric("x-sig")("gen-secret", b), payload: (r) => JSON.stringify({ "a/b": { "m~n": r } }) },
  ];
  beforeAll(async () => {
    for (const t of BOUND) await putType(app, t.type, { auth: t.auth, buffer_ttl_s: 0 });
  });

  describe.each(BOUND)("$type", (t) => {
    it("the payload names the run in the URL: received", async () => {
      const r1 = run(t.type);
      const waitId = await openWaitFor(app, r1, t.type);
      const body = t.payload(r1);
      const a = await post(app, r1, t.type, body, await t.sign(body));
      expect(a.status, a.text).toBe(202);
      expect(await waitStatus(app, waitId)).toBe("received");
    });

    it("the same signed delivery sent to another run's URL: 401, that run's wait stays waiting, nothing written", async () => {
      const a = run(t.type);
      const b = run(t.type);
      await openWaitFor(app, a, t.type);
      const waitB = await openWaitFor(app, b, t.type);
      const body = t.payload(a);
      const h = await t.sign(body);
      expect((await post(app, a, t.type, body, h)).status).toBe(202);
      await expectRefusedUnchanged(app, () => post(app, b, t.type, body, h));
      expect(await waitStatus(app, waitB)).toBe("waiting");
    });

    it("the pointer missing, null, an object, or the run with different case: 401", async () => {
      const r1 = run(t.type);
      await openWaitFor(app, r1, t.type);
      for (const body of [JSON.stringify({ other: 1 }), t.payload(null), t.payload({ run: r1 }), t.payload(r1.toUpperCase()), t.payload([r1])]) {
        const h = await t.sign(body);
        await expectRefusedUnchanged(app, () => post(app, r1, t.type, body, h));
      }
    });

    it("a number written the same as the run id matches", async () => {
      const r1 = String(900 + ++n);
      await openWaitFor(app, r1, t.type);
      const body = t.payload(Number(r1));
      const a = await post(app, r1, t.type, body, await t.sign(body));
      expect(a.status, a.text).toBe(202);
    });

    // Compared through a double, 12345678901234567891 was run 12345678901234567000: its own run
    // refused the delivery, and that other run accepted it. `1.0` was run 1.
    it("a number is its digits as written: a 64-bit id matches its own run and no other; 1.0 is not run 1", async () => {
      const digits = "12345678901234567891"; // each type has its own waits
      const rounded = String(Number(digits));
      expect(rounded).not.toBe(digits);
      const own = await openWaitFor(app, digits, t.type);
      const other = await openWaitFor(app, rounded, t.type);
      const body = t.payload(0).replace(/\b0\b/, digits);
      const h = await t.sign(body);
      await expectRefusedUnchanged(app, () => post(app, rounded, t.type, body, h));
      expect(await waitStatus(app, other)).toBe("waiting");
      const a = await post(app, digits, t.type, body, h);
      expect(a.status, a.text).toBe(202);
      expect(await waitStatus(app, own)).toBe("received");

      const one = String(++n);
      await openWaitFor(app, one, t.type);
      const written = t.payload(0).replace(/\b0\b/, `${one}.0`);
      await expectRefusedUnchanged(app, async () => post(app, one, t.type, written, await t.sign(written)));
    });
  });

  it("without run_pointer a body-only signature does not bind the run: documented residual risk (API.md: set run_pointer)", async () => {
    await putType(app, "gh-free", { auth: { scheme: "github", secrets: ["gh-secret"], replay_across_runs: true }, buffer_ttl_s: 0 });
    const a = run("free");
    const b = run("free");
    await openWaitFor(app, a, "gh-free");
    await openWaitFor(app, b, "gh-free");
    const body = '{"action":"approved"}';
    const h = await signGithub("gh-secret", body);
    expect((await post(app, a, "gh-free", body, h)).status).toBe(202);
    expect((await post(app, b, "gh-free", body, h)).status).toBe(202);
  });

  it("no table changed behind the refusals of this file: every signal in the log came from an accepted or authenticated request", async () => {
    const snap = await snapshot(app);
    expect(String(snap.signal_ids)).not.toMatch(/rejected_unauthenticated/);
  });
});
