import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { CallbackVerificationError, signCallback, verifyCallback, type SignalboxEvent } from "../src/index.ts";

// Signed by the `standardwebhooks` reference library, not by our own signer: a verifier tested
// only against its own signer could share its mistakes.
const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER_SECRET = "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXkh";
const NOW = new Date("2026-11-24T10:00:00Z");
const now = () => NOW.getTime();

const event = {
  id: "ev_42",
  type: "signal.received",
  occurred_at: "2026-11-24T09:59:59.000Z",
  wait: { id: "wt_1", run_id: "order-17", signal: "manager-approval", status: "received", result: { signal_id: "sg_1", sequence: 1, payload: { approved: true }, received_at: "2026-11-24T09:59:59.000Z" } },
};
const body = JSON.stringify(event);

function signed(opts: { secret?: string; id?: string; at?: Date; payload?: string } = {}) {
  const id = opts.id ?? event.id;
  const at = opts.at ?? NOW;
  const payload = opts.payload ?? body;
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": new Webhook(opts.secret ?? SECRET).sign(id, at, payload),
  };
}

async function rejection(promise: Promise<unknown>): Promise<string> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CallbackVerificationError);
  return (err as Error).message;
}

describe("verifyCallback", () => {
  it("returns the typed event of a genuine request, from a string, bytes or a Headers object", async () => {
    const got: SignalboxEvent = await verifyCallback(signed(), body, SECRET, { now });
    expect(got).toEqual(event);
    if (got.type === "signal.received") expect(got.wait.result?.payload).toEqual({ approved: true });
    await expect(verifyCallback(new Headers(signed()), new TextEncoder().encode(body), SECRET, { now })).resolves.toEqual(event);
    await expect(verifyCallback(signed(), new TextEncoder().encode(body).buffer, SECRET, { now })).resolves.toEqual(event);
    // Another library's Headers (node-fetch, a framework's): anything with get(name).
    const h: Record<string, string> = signed();
    const foreign = { get: (name: string) => h[name] ?? null } as unknown as Headers;
    await expect(verifyCallback(foreign, body, SECRET, { now })).resolves.toEqual(event);
  });

  it("accepts a run.start event (signal-with-start), which names its run and signal instead of a wait", async () => {
    const start = { id: "ev_43", type: "run.start", occurred_at: "2026-11-24T09:59:59.000Z", run_id: "order-18", signal: { id: "sg_2", name: "order-placed", payload: { total: 12 } } };
    const text = JSON.stringify(start);
    const got = await verifyCallback(signed({ id: start.id, payload: text }), text, SECRET, { now });
    expect(got).toEqual(start);
    if (got.type === "run.start") expect(got.signal.payload).toEqual({ total: 12 });
    const noRun = JSON.stringify({ ...start, run_id: undefined });
    expect(await rejection(verifyCallback(signed({ id: start.id, payload: noRun }), noRun, SECRET, { now }))).toBe("the body is not a signalbox event");
    const noSignal = JSON.stringify({ ...start, signal: null });
    expect(await rejection(verifyCallback(signed({ id: start.id, payload: noSignal }), noSignal, SECRET, { now }))).toBe("the body is not a signalbox event");
  });

  it("finds the headers whatever their case (node lowercases them, others may not)", async () => {
    const h = signed();
    const mixed = { "Webhook-Id": h["webhook-id"], "WEBHOOK-TIMESTAMP": h["webhook-timestamp"], "Webhook-Signature": h["webhook-signature"] };
    await expect(verifyCallback(mixed, body, SECRET, { now })).resolves.toEqual(event);
  });

  it("refuses a body changed by one byte, and a body re-serialised by a JSON parser", async () => {
    expect(await rejection(verifyCallback(signed(), body.replace("true", "false"), SECRET, { now }))).toBe("signature mismatch");
    expect(await rejection(verifyCallback(signed(), JSON.stringify(event, null, 2), SECRET, { now }))).toBe("signature mismatch");
  });

  it("refuses a signature made with another secret, and accepts either of two secrets while rotating", async () => {
    expect(await rejection(verifyCallback(signed({ secret: OTHER_SECRET }), body, SECRET, { now }))).toBe("signature mismatch");
    await expect(verifyCallback(signed({ secret: OTHER_SECRET }), body, [SECRET, OTHER_SECRET], { now })).resolves.toEqual(event);
  });

  it("accepts a header listing several signatures when one of them matches", async () => {
    const h = signed();
    const other = signed({ secret: OTHER_SECRET })["webhook-signature"];
    await expect(verifyCallback({ ...h, "webhook-signature": `${other} v2,AAAA ${h["webhook-signature"]}` }, body, SECRET, { now })).resolves.toEqual(event);
    expect(await rejection(verifyCallback({ ...h, "webhook-signature": `v2,${h["webhook-signature"].slice(3)}` }, body, SECRET, { now }))).toBe("no v1 signature");
  });

  it("accepts what the reference library accepts: a matching v1 beside empty, unparseable or other-version entries", async () => {
    const h = signed({ at: new Date() }); // the reference library checks the timestamp against its own clock
    const good = h["webhook-signature"];
    const variants = {
      "two spaces between entries": `v1,${"A".repeat(43)}=  ${good}`,
      "an entry of a future version in another alphabet": `${good} v2,sig_Zm9v-YmFy`,
      "an entry that is not base64": `v1,not*base64 ${good}`,
      // Two header lines a server merged with ", " (node does this for unknown headers): its entries stand.
      "a header repeated and merged": `${good}, ${good}`,
    };
    const results: Record<string, { reference: string; sdk: string }> = {};
    for (const [name, signature] of Object.entries(variants)) {
      const headers = { ...h, "webhook-signature": signature };
      const reference = (() => {
        try {
          new Webhook(SECRET).verify(body, headers);
          return "verified";
        } catch (err) {
          return String(err);
        }
      })();
      const sdk = await verifyCallback(headers, body, SECRET).then(
        () => "verified",
        (e: Error) => e.message,
      );
      results[name] = { reference, sdk };
    }
    expect(results).toEqual(Object.fromEntries(Object.keys(variants).map((name) => [name, { reference: "verified", sdk: "verified" }])));
  });

  it("refuses a header of only unparseable entries, or with no v1 entry that matches", async () => {
    const h = signed();
    expect(await rejection(verifyCallback({ ...h, "webhook-signature": "v1,not*base64  garbage" }, body, SECRET, { now }))).toBe("no v1 signature");
    expect(await rejection(verifyCallback({ ...h, "webhook-signature": `v1,${"A".repeat(43)}= v2,sig_Zm9v-YmFy` }, body, SECRET, { now }))).toBe("signature mismatch");
  });

  it("refuses a replay outside the tolerance, in the past and in the future, and honours toleranceS", async () => {
    const old = signed({ at: new Date(NOW.getTime() - 301_000) });
    expect(await rejection(verifyCallback(old, body, SECRET, { now }))).toBe("webhook-timestamp outside the tolerance");
    const ahead = signed({ at: new Date(NOW.getTime() + 301_000) });
    expect(await rejection(verifyCallback(ahead, body, SECRET, { now }))).toBe("webhook-timestamp outside the tolerance");
    await expect(verifyCallback(old, body, SECRET, { now, toleranceS: 600 })).resolves.toEqual(event);
    await expect(verifyCallback(signed({ at: new Date(NOW.getTime() - 299_000) }), body, SECRET, { now })).resolves.toEqual(event);
  });

  it("refuses missing, repeated and malformed headers", async () => {
    const h = signed();
    const { "webhook-id": _id, ...noId } = h;
    expect(await rejection(verifyCallback(noId, body, SECRET, { now }))).toBe("missing webhook-id");
    expect(await rejection(verifyCallback({ ...h, "webhook-signature": [h["webhook-signature"], h["webhook-signature"]] }, body, SECRET, { now }))).toBe(
      "more than one webhook-signature",
    );
    expect(await rejection(verifyCallback({ ...h, "webhook-id": "ev_42, ev_43" }, body, SECRET, { now }))).toBe("malformed webhook-id");
    expect(await rejection(verifyCallback({ ...h, "webhook-timestamp": `${h["webhook-timestamp"]}abc` }, body, SECRET, { now }))).toBe("malformed webhook-timestamp");
  });

  it("refuses a signed body that is not a signalbox event, or whose id is not the webhook-id", async () => {
    const notJson = "not json";
    expect(await rejection(verifyCallback(signed({ payload: notJson }), notJson, SECRET, { now }))).toBe("the body is not UTF-8 JSON");
    const other = JSON.stringify({ id: "ev_42", type: "push", wait: {} });
    expect(await rejection(verifyCallback(signed({ payload: other }), other, SECRET, { now }))).toBe("the body is not a signalbox event");
    expect(await rejection(verifyCallback(signed({ id: "ev_43" }), body, SECRET, { now }))).toBe("webhook-id does not match the event id");
  });

  it("refuses a toleranceS that is not a finite number of seconds, 0 or more, rather than accept any replay (NaN from an unset variable)", async () => {
    const yearAgo = signed({ at: new Date(NOW.getTime() - 365 * 86400_000) });
    const outcomes = await Promise.all(
      [Number(process.env.SURELY_UNSET_TOLERANCE_S), Infinity, -1].map((toleranceS) =>
        verifyCallback(yearAgo, body, SECRET, { now, toleranceS }).then(
          () => "verified",
          (e: Error) => e.name,
        ),
      ),
    );
    expect(outcomes).toEqual(["TypeError", "TypeError", "TypeError"]);
    await expect(verifyCallback(signed(), body, SECRET, { now, toleranceS: 0 })).resolves.toEqual(event);
  });

  it("says what is wrong with a secret that is not whsec_ and base64, instead of failing every request", async () => {
    await expect(verifyCallback(signed(), body, "not a secret!", { now })).rejects.toThrow(/whsec_ followed by base64/);
  });

  it("signCallback signs what the reference library verifies (for testing engine handlers)", async () => {
    const headers = await signCallback(SECRET, event.id, body, Math.floor(NOW.getTime() / 1000));
    // The library checks its own clock: sign for now to verify with it.
    const fresh = await signCallback(SECRET, event.id, body);
    expect(new Webhook(SECRET).verify(body, fresh)).toEqual(event);
    await expect(verifyCallback(headers, body, SECRET, { now })).resolves.toEqual(event);
  });
});
