import { decodeProtectedHeader, SignJWT } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { advanceClock, withProcessClockAhead } from "../helpers/clock.ts";
import { expectProblem, openWait as open, rawRequest } from "../helpers/http.ts";
import { checkPageBasics, findAll, textOf } from "../helpers/html-check.ts";
import { holdAt, releaseAllGates, settledWait } from "../helpers/race-gates.ts";
import { logCapture } from "../helpers/probes.ts";
import { LINK_KEYS, startTestApp, type TestApp } from "../helpers/test-app.ts";

// Approval links (API.md "human approvals"): a signed link per response; GET shows a page and
// does nothing; POST answers once, only the wait it was made for, until it expires.

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
  await declare(app, "approval", { auth: { scheme: "none" }, responses: ["approve", "reject"] });
  // Buffering on: an old link must still not leave a signal behind for a later wait.
  await declare(app, "approval-buffered", { auth: { scheme: "none" }, responses: ["approve", "reject"], buffer_ttl_s: 600 });
  await declare(app, "plain", { auth: { scheme: "none" } });
  await declare(app, "strict-approval", {
    auth: { scheme: "none" },
    responses: ["approve"],
    schema: { type: "object", properties: { response: {}, responder: {} }, additionalProperties: false },
  });
});
afterEach(() => releaseAllGates());
afterAll(async () => {
  releaseAllGates();
  await app?.close();
});

async function declare(on: TestApp, name: string, body: Record<string, unknown>) {
  const res = await on.api(`/signal-types/${name}`, { method: "PUT", json: body });
  expect([200, 201], await res.clone().text()).toContain(res.status);
}

async function openWait(run: string, spec: Record<string, unknown>, on = app): Promise<any> {
  return (await open(on, run, spec, 201)).body;
}

async function makeLinks(waitId: string, body: Record<string, unknown> = { responder: "kim@example.com" }, on = app): Promise<{ links: Record<string, string>; expires_at: string }> {
  const res = await on.api(`/waits/${waitId}/links`, { method: "POST", json: body });
  expect(res.status, await res.clone().text()).toBe(200);
  return res.json() as Promise<{ links: Record<string, string>; expires_at: string }>;
}

/** A link as a person's browser would use it: no token. */
const visit = (url: string, headers: Record<string, string> = {}) => fetch(url, { headers: { accept: "text/html", ...headers } });
const answer = (url: string, comment?: string, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: { accept: "text/html", "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(comment === undefined ? {} : { comment }).toString(),
  });

async function page(res: Response, status: number): Promise<{ html: string; h1: string }> {
  const html = await res.text();
  expect(res.status, html).toBe(status);
  expect(res.headers.get("content-type")).toMatch(/^text\/html; charset=utf-8/);
  expect(res.headers.get("content-security-policy")).toContain("default-src 'none'; style-src 'unsafe-inline'; form-action 'self'");
  expect(res.headers.get("cache-control")).toBe("no-store");
  const doc = checkPageBasics(html);
  return { html, h1: textOf(findAll(doc, "h1")[0]!) };
}

const waitOf = async (id: string) => (await (await app.api(`/waits/${id}`)).json()) as any;
const signalsOf = async (run: string, on = app) => ((await (await on.api(`/runs/${run}/signals?limit=500`)).json()) as any).items as any[];
const accepted = (items: any[]) => items.filter((s) => s.sequence !== null);
const tokenOf = (url: string) => url.slice(url.lastIndexOf("/") + 1);

describe("POST /waits/{id}/links", () => {
  it("makes one absolute link per response on the request's origin, valid for ttl_s", async () => {
    const wait = await openWait("links-1", { signal: "approval" });
    const before = Date.now();
    const made = await makeLinks(wait.id, { ttl_s: 3600, responder: "kim@example.com" });
    expect(Object.keys(made.links).sort()).toEqual(["approve", "reject"]);
    for (const url of Object.values(made.links)) expect(url.startsWith(`${app.baseUrl}/approvals/`)).toBe(true);
    expect(made.links.approve).not.toBe(made.links.reject);
    const expires = Date.parse(made.expires_at);
    expect(expires).toBeGreaterThan(before + 3590_000);
    expect(expires).toBeLessThanOrEqual(Date.now() + 3601_000); // whole seconds, rounded up
    expect(decodeProtectedHeader(tokenOf(made.links.approve!))).toMatchObject({ alg: "HS256", kid: "test-k1" });
  });

  it("never lets a link outlive the wait's deadline", async () => {
    const wait = await openWait("links-2", { signal: "approval", timeout_s: 120 });
    const made = await makeLinks(wait.id, { ttl_s: 86400, responder: "kim" });
    expect(Date.parse(made.expires_at)).toBeLessThanOrEqual(Date.parse(wait.timeout_at));
    expect(Date.parse(made.expires_at)).toBeGreaterThan(Date.parse(wait.timeout_at) - 2000);
  });

  it("needs a management token", async () => {
    const wait = await openWait("links-3", { signal: "approval" });
    const res = await fetch(`${app.baseUrl}/waits/${wait.id}/links`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ responder: "kim" }) });
    await expectProblem(res, 401);
    const wrong = await app.api(`/waits/${wait.id}/links`, { method: "POST", json: { responder: "kim" }, headers: { authorization: "Bearer nope" } });
    await expectProblem(wrong, 401);
  });

  it("is 409 for a type without responses or a wait that is not waiting, 404 for no wait, 400 for a bad body", async () => {
    const plain = await openWait("links-4", { signal: "plain" });
    expect((await expectProblem(await app.api(`/waits/${plain.id}/links`, { method: "POST", json: { responder: "kim" } }), 409)).detail).toMatch(/responses/);
    const timer = await openWait("links-4", { signal: "nap", timer: { delay_s: 3600 } });
    await expectProblem(await app.api(`/waits/${timer.id}/links`, { method: "POST", json: { responder: "kim" } }), 409);
    const done = await openWait("links-4", { signal: "approval" });
    expect((await app.api(`/waits/${done.id}/cancel`, { method: "POST" })).status).toBe(200);
    await expectProblem(await app.api(`/waits/${done.id}/links`, { method: "POST", json: { responder: "kim" } }), 409);
    await expectProblem(await app.api(`/waits/wt_nope/links`, { method: "POST", json: { responder: "kim" } }), 404);
    const open = await openWait("links-4b", { signal: "approval" });
    for (const bad of [{}, { responder: "" }, { responder: "kim", ttl_s: 0 }, { responder: "kim", ttl_s: 1.5 }, { responder: "kim", extra: 1 }, { responder: "x".repeat(201) }]) {
      await expectProblem(await app.api(`/waits/${open.id}/links`, { method: "POST", json: bad }), 400);
    }
  });
});

describe("the public /approvals/ prefix", () => {
  it("opens no other route without a token (dot segments, encoded slashes, other methods)", async () => {
    const wait = await openWait("prefix-1", { signal: "approval" });
    for (const path of [`/approvals/../waits/${wait.id}`, `/approvals/%2e%2e/waits/${wait.id}`, `/approvals/..%2fwaits%2f${wait.id}`, `/approvals/%2E%2E/signal-types`]) {
      for (const method of ["GET", "POST"]) {
        const res = await rawRequest(app.baseUrl, { method, path, headers: { accept: "application/json", "content-type": "application/json" }, body: method === "POST" ? "{}" : undefined });
        expect([400, 401, 404], `${method} ${path}: ${res.status} ${res.text}`).toContain(res.status);
        expect(res.text).not.toContain(`"run_id":"prefix-1"`);
      }
    }
    const put = await fetch(`${app.baseUrl}/approvals/anything`, { method: "PUT" });
    expect(put.status).toBe(404);
    expect((await waitOf(wait.id)).status).toBe("waiting");
  });
});

describe("GET on a link", () => {
  it("shows a confirmation page without a token and does nothing, however often it is fetched", async () => {
    const wait = await openWait("get-1", { signal: "approval" });
    const { links } = await makeLinks(wait.id);
    for (let i = 0; i < 3; i++) {
      const { html, h1 } = await page(await visit(links.approve!), 200);
      expect(h1).toBe("Confirm your answer");
      expect(html).toContain("kim@example.com");
      expect(html).toMatch(/<button type="submit">Answer “approve”<\/button>/);
    }
    expect((await fetch(links.reject!, { method: "HEAD" })).status).toBe(200);
    // A scanner that sends a bearer token, or asks for JSON, changes nothing either.
    await visit(links.approve!, { authorization: "Bearer test-management-key" });
    expect((await waitOf(wait.id)).status).toBe("waiting");
    expect(await signalsOf("get-1")).toEqual([]);
    // The links still work afterwards.
    await page(await answer(links.approve!), 200);
    expect((await waitOf(wait.id)).status).toBe("received");
  });
});

describe("POST on a link", () => {
  it("sends {response, responder, comment} as the wait's signal and answers with a result page", async () => {
    const wait = await openWait("post-1", { signal: "approval" });
    const { links } = await makeLinks(wait.id);
    const { html, h1 } = await page(await answer(links.approve!, "  Looks good <b>to me</b> & ship it \r\n"), 200);
    expect(h1).toMatch(/your answer was recorded/);
    expect(html).toContain("Looks good &lt;b&gt;to me&lt;/b&gt; &amp; ship it");
    const done = await settledWait(app, wait.id);
    expect(done.status).toBe("received");
    expect(done.result.payload).toEqual({ response: "approve", responder: "kim@example.com", comment: "Looks good <b>to me</b> & ship it" });
    const [signal] = accepted(await signalsOf("post-1"));
    expect(signal.idempotency_key).toMatch(/^link:lk_/);
  });

  it("omits a blank comment and keeps line breaks of a real one", async () => {
    const blank = await openWait("post-2", { signal: "approval" });
    await page(await answer((await makeLinks(blank.id)).links.reject!, "   \r\n "), 200);
    expect((await settledWait(app, blank.id)).result.payload).toEqual({ response: "reject", responder: "kim@example.com" });
    const lines = await openWait("post-2b", { signal: "approval" });
    await page(await answer((await makeLinks(lines.id)).links.approve!, "one\r\ntwo"), 200);
    expect((await settledWait(app, lines.id)).result.payload.comment).toBe("one\ntwo");
  });

  it("refuses a comment over 2000 characters without using the link", async () => {
    const wait = await openWait("post-3", { signal: "approval" });
    const { links } = await makeLinks(wait.id);
    const { h1 } = await page(await answer(links.approve!, "x".repeat(2001)), 400);
    expect(h1).toMatch(/too long/);
    expect((await waitOf(wait.id)).status).toBe("waiting");
    await page(await answer(links.approve!, "y".repeat(2000)), 200);
    expect((await settledWait(app, wait.id)).result.payload.comment).toHaveLength(2000);
  });

  it("a payload the type's schema refuses is a 422 page and does not use the link", async () => {
    const wait = await openWait("post-4", { signal: "strict-approval" });
    const { links } = await makeLinks(wait.id);
    await page(await answer(links.approve!, "a comment the schema does not allow"), 422);
    expect((await waitOf(wait.id)).status).toBe("waiting");
    await page(await answer(links.approve!), 200);
    expect((await waitOf(wait.id)).status).toBe("received");
  });
});

describe("a link whose signal type was deleted since", () => {
  it("is a 409 page (no answer is needed any more), not a 5xx", async () => {
    await declare(app, "short-lived", { auth: { scheme: "none" }, responses: ["approve", "reject"] });
    const wait = await openWait("deleted-type", { signal: "short-lived" });
    const { links } = await makeLinks(wait.id);
    expect((await app.api("/signal-types/short-lived", { method: "DELETE" })).status).toBeLessThan(300);
    expect((await page(await answer(links.approve!), 409)).h1).toMatch(/No answer is needed/);
  });
});

describe("an answer that came too late", () => {
  it("is never redriven to the run's next wait of that name (one by one: 409 not_redrivable; in bulk: not taken)", async () => {
    const first = await openWait("late-answer", { signal: "approval" });
    const { links } = await makeLinks(first.id);
    // The answer passes its checks, then its wait is cancelled before intake: intake records it
    // as rejected_not_waiting.
    const gate = holdAt("respond-to-link:checked");
    const held = answer(links.approve!);
    expect(await gate.reached).toBe(first.id);
    expect((await app.api(`/waits/${first.id}/cancel`, { method: "POST", json: {} })).status).toBeLessThan(300);
    gate.release();
    await page(await held, 409);
    const [late] = (await signalsOf("late-answer")).filter((s) => s.outcome === "rejected_not_waiting");
    expect(late.idempotency_key).toMatch(/^link:/);

    const next = await openWait("late-answer", { signal: "approval" });
    const one = await app.api("/signals/redrive", { method: "POST", json: { signal_id: late.id } });
    expect(one.status).toBe(409);
    expect(await one.json()).toMatchObject({ title: "not_redrivable" });
    const bulk = await app.api("/signals/redrive", { method: "POST", json: { filter: { run: "late-answer" } } });
    expect(await bulk.json()).toMatchObject({ redriven: 0 });
    expect((await waitOf(next.id)).status).toBe("waiting");
  });
});

describe("the request log", () => {
  it("never holds a link's token (the path is logged as /approvals/:token)", async () => {
    const log = logCapture<{ msg: string; path?: string }>();
    const logged = await startTestApp({ databaseUrl: app.databaseUrl, worker: false, env: { LOG_LEVEL: "info" }, logStream: log.stream });
    try {
      const wait = await openWait("logged-link", { signal: "approval" }, logged);
      const { links } = await makeLinks(wait.id, { responder: "kim@example.com" }, logged);
      await visit(links.approve!);
      await answer(links.approve!);
      const requests = log.lines.filter((l) => l.msg === "request" && l.path?.startsWith("/approvals/"));
      expect(requests.length).toBeGreaterThanOrEqual(2);
      expect(requests.map((l) => l.path)).toEqual(requests.map(() => "/approvals/:token"));
      expect(JSON.stringify(log.lines)).not.toContain(tokenOf(links.approve!));
    } finally {
      await logged.close();
    }
  });
});

describe("a link works once", () => {
  it("a second use, or another response of the same set, is a 409 page and sends nothing", async () => {
    const wait = await openWait("once-1", { signal: "approval" });
    const { links } = await makeLinks(wait.id);
    await page(await answer(links.approve!, "first"), 200);
    expect((await page(await answer(links.approve!, "first"), 409)).h1).toMatch(/already been used/);
    expect((await page(await answer(links.approve!, "different"), 409)).h1).toMatch(/already been used/);
    expect((await page(await answer(links.reject!), 409)).h1).toMatch(/already been used/);
    expect((await page(await visit(links.approve!), 409)).h1).toMatch(/already been used/);
    const items = await signalsOf("once-1");
    expect(accepted(items)).toHaveLength(1);
    expect(items).toHaveLength(1); // a refused use is not even a rejected signal: nothing reached intake's log
    expect((await waitOf(wait.id)).result.payload.comment).toBe("first");
  });

  it("under concurrent uses of one set exactly one answer is recorded", async () => {
    for (let round = 0; round < 5; round++) {
      const run = `once-race-${round}`;
      const wait = await openWait(run, { signal: "approval" });
      const { links } = await makeLinks(wait.id);
      const uses = [...Array(6)].map((_, i) => answer(i % 3 === 2 ? links.reject! : links.approve!, `use ${i}`));
      const statuses = (await Promise.all(uses)).map((r) => r.status).sort();
      expect(statuses).toEqual([200, 409, 409, 409, 409, 409]);
      expect(accepted(await signalsOf(run))).toHaveLength(1);
      expect((await waitOf(wait.id)).status).toBe("received");
    }
  });

  it("a use held after its checks loses to one that commits meanwhile (the claim decides, not the check)", async () => {
    const wait = await openWait("once-held", { signal: "approval" });
    const { links } = await makeLinks(wait.id);
    const gate = holdAt("respond-to-link:checked");
    const held = answer(links.approve!, "held");
    expect(await gate.reached).toBe(wait.id);
    await page(await answer(links.reject!, "meanwhile"), 200); // passes the point: only the first arrival is held
    gate.release();
    expect((await page(await held, 409)).h1).toMatch(/already been used/);
    expect((await waitOf(wait.id)).result.payload).toMatchObject({ response: "reject", comment: "meanwhile" });
    expect(accepted(await signalsOf("once-held"))).toHaveLength(1);
  });
});

describe("a link expires", () => {
  it("after ttl_s: GET and POST are 410 pages and the wait stays waiting", async () => {
    const wait = await openWait("expire-1", { signal: "approval" });
    const { links } = await makeLinks(wait.id, { ttl_s: 60, responder: "kim" });
    await withProcessClockAhead(59, async () => {
      expect((await page(await visit(links.approve!), 200)).h1).not.toMatch(/expired/); // a second before: still good
    });
    await withProcessClockAhead(61, async () => {
      expect((await page(await visit(links.approve!), 410)).h1).toMatch(/expired/);
      expect((await page(await answer(links.approve!), 410)).h1).toMatch(/expired/);
    });
    expect((await waitOf(wait.id)).status).toBe("waiting");
    expect(await signalsOf("expire-1")).toEqual([]);
  });

  it("answers problem+json to a client that asks for JSON", async () => {
    const wait = await openWait("expire-2", { signal: "approval" });
    const { links } = await makeLinks(wait.id, { ttl_s: 60, responder: "kim" });
    const problem = await withProcessClockAhead(61, async () => expectProblem(await answer(links.approve!, undefined, { accept: "application/json" }), 410));
    expect(problem.type).toBe("https://signalbox.dev/problems/link-expired");
  });
});

describe("a tampered link is a 400 page", () => {
  const secretOf = (ring: string) => new TextEncoder().encode(ring.slice(ring.indexOf(":") + 1));
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");

  it("refuses altered payloads and signatures, unknown or missing kids, other algorithms and alg none", async () => {
    const wait = await openWait("tamper-1", { signal: "approval" });
    const { links } = await makeLinks(wait.id);
    const url = links.approve!;
    const token = tokenOf(url);
    const [header, payload, signature] = token.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, "base64url").toString());
    const base = url.slice(0, url.length - token.length);
    const flip = (s: string, at: number) => s.slice(0, at) + (s[at] === "A" ? "B" : "A") + s.slice(at + 1);
    const key = secretOf(LINK_KEYS);
    const sign = (hdr: Record<string, unknown>, body = claims, secret = key) => new SignJWT(body).setProtectedHeader(hdr as { alg: string }).sign(secret);
    const forged = [
      `${header}.${flip(payload, 10)}.${signature}`,
      `${header}.${payload}.${flip(signature, 5)}`,
      `${header}.${b64({ ...claims, rsp: "reject" })}.${signature}`, // the other response, the old signature
      `${header}.${b64({ ...claims, exp: claims.exp + 86400 })}.${signature}`,
      `${b64({ alg: "none", kid: "test-k1", typ: "signalbox-approval+jwt" })}.${payload}.`,
      `${b64({ alg: "none", kid: "test-k1", typ: "signalbox-approval+jwt" })}.${payload}.${signature}`,
      await sign({ alg: "HS256", kid: "test-k9", typ: "signalbox-approval+jwt" }), // unknown kid, right secret
      await sign({ alg: "HS256", typ: "signalbox-approval+jwt" }), // no kid
      await sign({ alg: "HS256", kid: "test-k1", typ: "signalbox-approval+jwt" }, claims, new TextEncoder().encode("another-secret-of-at-least-32-bytes!!")),
      await sign({ alg: "HS384", kid: "test-k1", typ: "signalbox-approval+jwt" }),
      await sign({ alg: "HS256", kid: "test-k1" }), // a plain JWT with the right key: not a link
      await sign({ alg: "HS256", kid: "test-k1", typ: "signalbox-approval+jwt" }, { ...claims, ver: "x" }),
      "not-a-jwt",
      `${header}.${payload}`,
      "x".repeat(5000),
    ];
    for (const bad of forged) {
      for (const res of [await visit(base + bad), await answer(base + bad)]) {
        const status = res.status;
        const { h1 } = await page(res, status);
        expect(status, bad).toBe(400);
        expect(h1).toBe("This link is not valid");
      }
    }
    expect((await waitOf(wait.id)).status).toBe("waiting");
    expect(await signalsOf("tamper-1")).toEqual([]);
    // The untouched link still works: the refusals above were about the forgeries.
    await page(await answer(url), 200);
  });
});

describe("a link answers only the wait it was made for", () => {
  it("a later wait with the same name is not resolved by an old link (nor buffered for)", async () => {
    const first = await openWait("later-1", { signal: "approval-buffered" });
    const { links } = await makeLinks(first.id);
    expect((await app.api(`/waits/${first.id}/cancel`, { method: "POST" })).status).toBe(200);
    const second = await openWait("later-1", { signal: "approval-buffered" });
    expect((await page(await visit(links.approve!), 409)).h1).toMatch(/No answer is needed/);
    expect((await page(await answer(links.approve!), 409)).h1).toMatch(/No answer is needed/);
    expect((await waitOf(second.id)).status).toBe("waiting");
    expect(accepted(await signalsOf("later-1"))).toEqual([]);
    // Nothing was buffered: the next wait of that name is not settled either.
    expect((await app.api(`/waits/${second.id}/cancel`, { method: "POST" })).status).toBe(200);
    const third = await openWait("later-1", { signal: "approval-buffered" });
    expect(third.status).toBe("waiting");
  });

  it("even when the wait is replaced after the link's checks passed (decided under the run's lock)", async () => {
    const first = await openWait("later-race", { signal: "approval-buffered" });
    const { links } = await makeLinks(first.id);
    const gate = holdAt("respond-to-link:checked");
    const held = answer(links.approve!, "for the first wait");
    await gate.reached;
    expect((await app.api(`/waits/${first.id}/cancel`, { method: "POST" })).status).toBe(200);
    const second = await openWait("later-race", { signal: "approval-buffered" });
    gate.release();
    expect((await page(await held, 409)).h1).toMatch(/No answer is needed/);
    expect((await waitOf(second.id)).status).toBe("waiting");
    const items = await signalsOf("later-race");
    expect(accepted(items)).toEqual([]);
    expect(items.map((s) => s.outcome)).toEqual(["rejected_not_waiting"]);
    // The link was for the first wait: it cannot answer the second one either later.
    expect((await page(await answer(links.approve!), 409)).h1).toMatch(/already been used|No answer is needed/);
    expect((await waitOf(second.id)).status).toBe("waiting");
  });

  it("a link of a wait answered some other way is a 409 page", async () => {
    const wait = await openWait("settled-1", { signal: "approval" });
    const { links } = await makeLinks(wait.id);
    const direct = await app.api("/signals/settled-1/approval", { method: "POST", json: { response: "reject", responder: "ops" } });
    expect(direct.status).toBe(202);
    expect((await page(await visit(links.approve!), 409)).h1).toMatch(/No answer is needed/);
    expect((await page(await answer(links.approve!), 409)).h1).toMatch(/No answer is needed/);
    expect((await waitOf(wait.id)).result.payload.responder).toBe("ops");
  });

  it("a link of a wait with a deadline expires with it", async () => {
    const wait = await openWait("settled-2", { signal: "approval", timeout_s: 60 });
    const { links, expires_at } = await makeLinks(wait.id, { responder: "kim", ttl_s: 3600 });
    expect(Date.parse(expires_at)).toBeLessThanOrEqual(Date.parse(wait.timeout_at));
    // A minute passes on both clocks: the database's (the wait times out) and the process's (the link's exp).
    await advanceClock(app, 60);
    expect((await settledWait(app, wait.id)).status).toBe("timed_out");
    await withProcessClockAhead(60, async () => {
      expect((await page(await answer(links.approve!), 410)).h1).toMatch(/expired/);
    });
  });
});

describe("quorum waits through links", () => {
  it("each responder's link is one vote; the wait is received when count agree", async () => {
    const wait = await openWait("quorum-1", { signal: "approval", quorum: { count: 2, veto: ["reject"] } });
    const kim = await makeLinks(wait.id, { responder: "kim" });
    const lee = await makeLinks(wait.id, { responder: "lee" });
    const first = await page(await answer(kim.links.approve!), 200);
    expect(first.html).toMatch(/counts as one vote/);
    const partial = await waitOf(wait.id);
    expect(partial).toMatchObject({ status: "waiting", votes: { approve: ["kim"] } });
    await page(await answer(kim.links.reject!), 409); // kim answered already: the set works once
    const second = await page(await answer(lee.links.approve!, "agreed"), 200);
    expect(second.html).toMatch(/decided/);
    const done = await settledWait(app, wait.id);
    expect(done.status).toBe("received");
    expect(done.votes).toEqual({ approve: ["kim", "lee"] });
    expect(done.result.payload).toEqual({ response: "approve", responder: "lee", comment: "agreed" });
  });

  it("a veto through a link decides at once", async () => {
    const wait = await openWait("quorum-2", { signal: "approval", quorum: { count: 3, veto: ["reject"] } });
    const max = await makeLinks(wait.id, { responder: "max" });
    await page(await answer(max.links.reject!), 200);
    expect((await settledWait(app, wait.id)).status).toBe("received");
  });
});

describe("where links point", () => {
  const linksWithHost = (on: TestApp, waitId: string, host: string) =>
    rawRequest(on.baseUrl, {
      method: "POST",
      path: `/waits/${waitId}/links`,
      headers: { host, authorization: "Bearer test-management-key", "content-type": "application/json" },
      body: JSON.stringify({ responder: "kim" }),
    });

  it("without SIGNALBOX_PUBLIC_URL, a loopback request's own origin", async () => {
    const wait = await openWait("origin-0", { signal: "approval" });
    const { links } = await makeLinks(wait.id);
    expect(links.approve!.startsWith(`${app.baseUrl}/approvals/`)).toBe(true);
  });

  it("never a Host the sender chose: another host is 400 unless SIGNALBOX_LINK_HOSTS lists it", async () => {
    const wait = await openWait("origin-1", { signal: "approval" });
    const refused = await linksWithHost(app, wait.id, "evil.example");
    expect(refused.status, refused.text).toBe(400);
    expect(JSON.parse(refused.text).detail).toMatch(/SIGNALBOX_PUBLIC_URL.*SIGNALBOX_LINK_HOSTS/);

    const other = await startTestApp({ worker: false, env: { SIGNALBOX_LINK_HOSTS: "signalbox.internal:8123" } });
    try {
      await declare(other, "approval", { auth: { scheme: "none" }, responses: ["approve", "reject"] });
      const listed = await openWait("origin-2", { signal: "approval" }, other);
      const res = await linksWithHost(other, listed.id, "signalbox.internal:8123");
      expect(res.status, res.text).toBe(200);
      expect(JSON.parse(res.text).links.approve).toMatch(/^http:\/\/signalbox\.internal:8123\/approvals\/[\w-]+\.[\w-]+\.[\w-]+$/);
      expect((await linksWithHost(other, listed.id, "evil.example")).status).toBe(400);
    } finally {
      await other.close();
    }
  });

  it("uses SIGNALBOX_PUBLIC_URL when set (a path prefix kept, no double slash)", async () => {
    const other = await startTestApp({ worker: false, env: { SIGNALBOX_PUBLIC_URL: "https://approvals.example.com/sb/" } });
    try {
      await declare(other, "approval", { auth: { scheme: "none" }, responses: ["approve", "reject"] });
      const wait = await openWait("public-1", { signal: "approval" }, other);
      const { links } = await makeLinks(wait.id, { responder: "kim" }, other);
      expect(links.approve).toMatch(/^https:\/\/approvals\.example\.com\/sb\/approvals\/[\w-]+\.[\w-]+\.[\w-]+$/);
      // Behind the proxy that URL reaches this app: the token is what matters.
      await page(await answer(`${other.baseUrl}/approvals/${tokenOf(links.approve!)}`), 200);
      expect((await (await other.api(`/waits/${wait.id}`)).json() as any).status).toBe("received");
    } finally {
      await other.close();
    }
  });
});

describe("rotating the signing key", () => {
  const K2 = "k2:second-link-key-0123456789abcdefghijklmnop";

  it("keeps unexpired links valid (kid); new links are signed with the new first key; a removed key's links stop working", async () => {
    const old = await openWait("rotate-1", { signal: "approval" });
    const oldLinks = await makeLinks(old.id);
    const removedLater = await openWait("rotate-2", { signal: "approval" });
    const removedLinks = await makeLinks(removedLater.id);
    expect(decodeProtectedHeader(tokenOf(oldLinks.links.approve!)).kid).toBe("test-k1");

    // "Restart" with ring [k2, k1]: a second app on the same database.
    const rotated = await startTestApp({ databaseUrl: app.databaseUrl, worker: false, env: { SIGNALBOX_LINK_KEYS: `${K2},${LINK_KEYS}` } });
    try {
      const on = (url: string) => `${rotated.baseUrl}/approvals/${tokenOf(url)}`;
      await page(await visit(on(oldLinks.links.approve!)), 200);
      await page(await answer(on(oldLinks.links.approve!)), 200);
      expect((await waitOf(old.id)).status).toBe("received");

      const fresh = await openWait("rotate-3", { signal: "approval" }, rotated);
      const freshLinks = await makeLinks(fresh.id, { responder: "kim" }, rotated);
      expect(decodeProtectedHeader(tokenOf(freshLinks.links.approve!)).kid).toBe("k2");
      // The old ring does not know k2.
      await page(await visit(`${app.baseUrl}/approvals/${tokenOf(freshLinks.links.approve!)}`), 400);
      await page(await answer(freshLinks.links.approve!), 200);
    } finally {
      await rotated.close();
    }

    // Ring [k2] only: k1's links are refused.
    const retired = await startTestApp({ databaseUrl: app.databaseUrl, worker: false, env: { SIGNALBOX_LINK_KEYS: K2 } });
    try {
      await page(await answer(`${retired.baseUrl}/approvals/${tokenOf(removedLinks.links.approve!)}`), 400);
      expect((await waitOf(removedLater.id)).status).toBe("waiting");
    } finally {
      await retired.close();
    }
  });

  it("refuses a key ring with a short secret, a bad kid or a repeated kid at start", async () => {
    const { loadConfig } = await import("../../src/config.ts");
    expect(() => loadConfig({ SIGNALBOX_LINK_KEYS: "k1:short" })).toThrow(/at least 32 bytes/);
    expect(() => loadConfig({ SIGNALBOX_LINK_KEYS: "no-colon-here-but-long-enough-0123456789" })).toThrow(/kid:secret/);
    expect(() => loadConfig({ SIGNALBOX_LINK_KEYS: `${K2},${K2}` })).toThrow(/twice/);
    expect(loadConfig({ SIGNALBOX_LINK_KEYS: ` ${K2} , ${LINK_KEYS} ` }).SIGNALBOX_LINK_KEYS.map((k) => k.kid)).toEqual(["k2", "test-k1"]);
  });
});
