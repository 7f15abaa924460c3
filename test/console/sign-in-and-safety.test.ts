import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SESSION_COOKIE, SessionKeys } from "../../src/console/session.ts";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";
import { signInConsole, signInForm } from "./console-client.ts";

// The console's doors over plain HTTP: who gets in, what the cookie is, what a forged form does.

const JWT_SECRET = "console-test-jwt-secret-0123456789abcdef";
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_JWT_SECRET: JWT_SECRET }, worker: false });
});
afterAll(async () => {
  await app?.close();
});

const get = (path: string, init: RequestInit = {}) => fetch(app.baseUrl + path, { redirect: "manual", ...init });

describe("signing in", () => {
  it("a page without a session redirects to the sign-in page, keeping where it was going", async () => {
    const res = await get("/console/waits?signal=approval");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe(`/console/sign-in?next=${encodeURIComponent("/console/waits?signal=approval")}`);
    const runs = await get("/console/runs/r-1");
    expect(runs.headers.get("location")).toMatch(/^\/console\/sign-in\?next=/);
  });

  it("every console page has a Content-Security-Policy with no inline script, and no inline script", async () => {
    const res = await get("/console/sign-in");
    expect(res.status).toBe(200);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    const page = await res.text();
    expect(page.match(/<script[^>]*>/g)).toEqual([expect.stringMatching(/^<script src="\/console\/assets\/console\.[0-9a-f]{12}\.js" defer>$/)]);
    expect(page).not.toMatch(/https?:\/\//); // nothing from another host
  });

  it("a wrong credential is refused with the form again, and no cookie", async () => {
    const res = await get("/console/sign-in", signInForm({ credential: "not-the-key", name: "Kim", next: "/console/waits" }));
    expect(res.status).toBe(401);
    expect(res.headers.getSetCookie()).toEqual([]);
    expect(await res.text()).toContain("That key or token is not valid.");
  });

  it("a key holder must give a name (a key names nobody)", async () => {
    const res = await get("/console/sign-in", signInForm({ credential: API_KEY, name: " ", next: "/console/waits" }));
    expect(res.status).toBe(401);
    expect(res.headers.getSetCookie()).toEqual([]);
    const page = await res.text();
    expect(page).toContain("give your name");
    expect(page).not.toContain(API_KEY); // the credential is never echoed
  });

  it("the session cookie is HttpOnly, SameSite=Strict, scoped to /console, expiring, and holds no key", async () => {
    const res = await get("/console/sign-in", signInForm({ credential: API_KEY, name: "Kim Operator", next: "/console/signal-types" }));
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/signal-types");
    const [cookie] = res.headers.getSetCookie();
    expect(cookie).toMatch(/^signalbox_console=[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+;/);
    expect(cookie).toMatch(/; HttpOnly/);
    expect(cookie).toMatch(/; SameSite=Strict/);
    expect(cookie).toMatch(/; Path=\/console/);
    expect(cookie).toMatch(/; Max-Age=28800/);
    expect(cookie).not.toMatch(/; Secure/); // plain http here; see the https case below
    const value = cookie!.split(";")[0]!.split("=")[1]!;
    expect(Buffer.from(value.split(".")[0]!, "base64url").toString()).not.toContain(API_KEY);
  });

  it("next= never leads to another site", async () => {
    for (const next of ["https://evil.example/", "//evil.example/console", "/console/../waits", "/console/%2E%2e/metrics", "/other", "/console/sign-in"]) {
      const res = await get("/console/sign-in", signInForm({ credential: API_KEY, name: "Kim", next }));
      expect(res.headers.get("location"), next).toBe("/console/waits");
    }
  });

  it("a JWT signs in as its subject, and the session ends no later than the token", async () => {
    const exp = Math.floor(Date.now() / 1000) + 600;
    const jwt = await new SignJWT({ email: "ops@example.com" }).setProtectedHeader({ alg: "HS256" }).setSubject("user-7").setExpirationTime(exp).sign(new TextEncoder().encode(JWT_SECRET));
    const res = await get("/console/sign-in", signInForm({ credential: jwt, name: "", next: "/console/waits" }));
    expect(res.status).toBe(303);
    const cookie = res.headers.getSetCookie()[0]!;
    const maxAge = Number(/Max-Age=(\d+)/.exec(cookie)?.[1]);
    expect(maxAge).toBeGreaterThan(500);
    expect(maxAge).toBeLessThanOrEqual(600);
    const page = await (await get("/console/waits", { headers: { cookie: cookie.split(";")[0]! } })).text();
    expect(page).toContain('<span class="who">ops@example.com</span>');
    expect(page).not.toContain(jwt);
  });

  it("/console and /console/ lead to the overview", async () => {
    const op = await signInConsole(app);
    for (const p of ["/console", "/console/"]) {
      const res = await op.get(p);
      expect(res.status, p).toBe(303);
      expect(res.headers.get("location"), p).toBe("/console/overview");
    }
  });

  it("a tampered or foreign cookie is no session", async () => {
    const op = await signInConsole(app);
    const [name, value] = op.cookie.split("=");
    const [body, mac] = value!.split(".");
    const forged = Buffer.from(JSON.stringify({ who: "mallory", via: "jwt", exp: 9999999999, sid: "x" })).toString("base64url");
    for (const cookie of [`${name}=${forged}.${mac}`, `${name}=${body}.${mac!.slice(0, -2)}AA`, `${name}=garbage`]) {
      const res = await get("/console/waits", { headers: { cookie } });
      expect(res.status, cookie).toBe(303);
    }
  });

  it("a cookie sealed with the callback secret (every callback receiver holds it) is no session", async () => {
    const session = { who: "mallory", via: "jwt" as const, exp: Math.floor(Date.now() / 1000) + 600, sid: "x" };
    const cookie = `${SESSION_COOKIE}=${new SessionKeys(app.deps.secrets.callbackSecret).seal(session)}`;
    expect((await get("/console/waits", { headers: { cookie } })).status).toBe(303);
  });

  it("a token-made session is no session where tokens are not accepted (no JWT secret or JWKS)", async () => {
    const plain = await startTestApp({ worker: false });
    try {
      // Sealed with each key a console could have used: none makes a session here.
      for (const secret of [plain.deps.secrets.linkKeys[0]!.secret, plain.deps.secrets.callbackSecret]) {
        const cookie = `${SESSION_COOKIE}=${new SessionKeys(secret).seal({ who: "mallory", via: "jwt", exp: Math.floor(Date.now() / 1000) + 600, sid: "x" })}`;
        expect((await fetch(`${plain.baseUrl}/console/waits`, { redirect: "manual", headers: { cookie } })).status).toBe(303);
      }
    } finally {
      await plain.close();
    }
  });

  it("a sign-in form posted from another site signs nobody in (login CSRF); from the console itself it does", async () => {
    const form = (site: string) => {
      const init = signInForm({ credential: API_KEY, name: "Kim", next: "/console" });
      return { ...init, headers: { ...(init.headers as Record<string, string>), "sec-fetch-site": site } };
    };
    for (const site of ["cross-site", "same-site"]) {
      const res = await get("/console/sign-in", form(site));
      expect(res.status, site).toBe(403);
      expect(res.headers.getSetCookie()).toEqual([]);
    }
    expect((await get("/console/sign-in", form("same-origin"))).status).toBe(303);
  });

  it("the session cookie is no bearer token: the API still asks for one", async () => {
    const op = await signInConsole(app);
    const res = await get("/waits", { headers: { cookie: op.cookie } });
    expect(res.status).toBe(401);
  });

  it("signing out clears the cookie", async () => {
    const op = await signInConsole(app);
    const res = await op.post("/console/sign-out");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/console/sign-in?signed_out=1");
    expect(res.headers.getSetCookie()[0]).toMatch(/^signalbox_console=;.*Max-Age=0/);
  });
});

describe("forms", () => {
  it("a forged form (no token, a wrong one, another session's) changes nothing; the page's own token works", async () => {
    await app.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } });
    await app.api("/runs/csrf-1/waits", { method: "POST", json: { signal: "approval" } });
    const op = await signInConsole(app, { name: "Kim Operator" });
    const other = await signInConsole(app, { name: "Someone Else" });
    expect(other.csrf).not.toBe(op.csrf);

    const paused = async () => ((await (await app.api("/runs/csrf-1")).json()) as { control: { is_paused: boolean; paused_by: string | null } }).control;
    for (const token of [undefined, "", "AAAA", other.csrf]) {
      const res = await fetch(`${app.baseUrl}/console/runs/csrf-1/pause`, {
        method: "POST",
        body: new URLSearchParams(token === undefined ? { reason: "forged" } : { _csrf: token, reason: "forged" }),
        headers: { cookie: op.cookie, "content-type": "application/x-www-form-urlencoded" },
        redirect: "manual",
      });
      expect(res.status, String(token)).toBe(403);
      expect(await res.text()).toContain("nothing was changed");
      expect(await paused()).toMatchObject({ is_paused: false });
    }

    const ok = await op.post("/console/runs/csrf-1/pause", { reason: "checking the vendor" });
    expect(ok.status).toBe(303);
    expect(ok.headers.get("location")).toBe("/console/runs/csrf-1?done=paused");
    expect(await paused()).toMatchObject({ is_paused: true, paused_by: "Kim Operator" });
  });

  it("a form without a session is refused, not redirected (a POST is never replayed after sign-in)", async () => {
    const res = await fetch(`${app.baseUrl}/console/runs/csrf-1/resume`, { method: "POST", body: new URLSearchParams({ _csrf: "x" }), headers: { "content-type": "application/x-www-form-urlencoded" }, redirect: "manual" });
    expect(res.status).toBe(401);
  });

  it("a form that is not urlencoded is 415", async () => {
    const op = await signInConsole(app);
    const res = await fetch(`${app.baseUrl}/console/runs/csrf-1/resume`, { method: "POST", body: JSON.stringify({ _csrf: op.csrf }), headers: { cookie: op.cookie, "content-type": "application/json" }, redirect: "manual" });
    expect(res.status).toBe(415);
  });
});

describe("bad input gets a clear page, never a 5xx", () => {
  it.each([
    ["/console/waits?deadline_before=yesterday", 400, "Times out before"],
    ["/console/waits?kind=robot", 400, "Kind: one of"],
    ["/console/waits?meta=novalue", 400, "write key=value"],
    ["/console/waits?signal=%20bad%20name", 400, "Signal: 1 to 100"],
    ["/console/waits?cursor=not-a-cursor", 400, "cursor"],
    ["/console/runs/has%20space", 400, "run id"],
    ["/console/runs/nobody-knows-me", 404, "no run"],
    ["/console/runs/csrf-1?after=zz", 400, "event id"],
    ["/console/signal-types/nope", 404, "no signal type"],
    ["/console/no-such-page", 404, "no page"],
    ["/console/assets/console.css", 404, "No such file"],
  ])("%s → %i", async (path, status, text) => {
    const op = await signInConsole(app);
    const res = await op.get(path);
    expect(res.status).toBe(status);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await res.text()).toContain(text);
  });
});

describe("a run's pause, resume and cancel forms", () => {
  it("take a reason Postgres could not store as is (NUL, a surrogate pair cut at 1,000 characters): no 5xx", async () => {
    expect((await app.api("/runs/reason-1/waits", { method: "POST", json: { signal: "approval" } })).status).toBe(201);
    const op = await signInConsole(app);
    for (const [verb, reason] of [["pause", "a\u0000b"], ["resume", `${"a".repeat(999)}😀`], ["cancel", "\ud800 alone"]] as const) {
      const res = await op.post(`/console/runs/reason-1/${verb}`, { reason });
      expect(res.status, `${verb} ${await res.clone().text()}`).toBe(303);
    }
  });
});

describe("answering approvals over HTTP", () => {
  it("a response the type does not allow, an unknown wait, a wait that is no approval: a page, and nothing recorded", async () => {
    await app.api("/signal-types/decision", { method: "PUT", json: { auth: { scheme: "none" }, responses: ["approve", "reject"] } });
    const open = async (run: string, body: unknown) => ((await (await app.api(`/runs/${run}/waits`, { method: "POST", json: body })).json()) as { id: string }).id;
    const decision = await open("answer-1", { signal: "decision" });
    const plain = await open("answer-2", { signal: "approval" });
    const op = await signInConsole(app);

    const maybe = await op.post(`/console/approvals/${decision}`, { response: "maybe" });
    expect(maybe.status).toBe(400);
    expect(await maybe.text()).toContain("must be one of approve, reject");
    expect((await op.post("/console/approvals/wt_0000000000000000000000000", { response: "approve" })).status).toBe(404);
    expect((await op.post(`/console/approvals/${plain}`, { response: "approve" })).status).toBe(409);
    expect((await op.post("/console/approvals/not-an-id", { response: "approve" })).status).toBe(400);
    const signals = (await (await app.api("/runs/answer-1/signals")).json()) as { items: unknown[] };
    expect(signals.items).toEqual([]);
  });

  it("one vote per operator on a quorum wait: the same answer again is a duplicate, a different one is refused", async () => {
    const id = ((await (await app.api("/runs/answer-3/waits", { method: "POST", json: { signal: "decision", quorum: { count: 2 } } })).json()) as { id: string }).id;
    const op = await signInConsole(app, { name: "Pat" });
    const first = await op.post(`/console/approvals/${id}`, { response: "approve" });
    expect(first.headers.get("location")).toBe("/console/approvals?answered=vote");
    expect((await op.post(`/console/approvals/${id}`, { response: "approve" })).headers.get("location")).toBe("/console/approvals?answered=duplicate");
    expect((await op.post(`/console/approvals/${id}`, { response: "reject" })).headers.get("location")).toBe("/console/approvals?answered=rejected_idempotency_conflict");
    const wait = (await (await app.api(`/waits/${id}`)).json()) as { status: string; votes: unknown };
    expect(wait).toMatchObject({ status: "waiting", votes: { approve: ["Pat"] } });
    const page = await (await op.get("/console/approvals?answered=rejected_idempotency_conflict")).text();
    expect(page).toContain("your first answer stands");
  });
});

describe("https", () => {
  it("behind an https public URL the cookie is Secure", async () => {
    const secure = await startTestApp({ env: { SIGNALBOX_PUBLIC_URL: "https://signalbox.example.com" }, worker: false, databaseUrl: app.databaseUrl });
    try {
      const res = await fetch(`${secure.baseUrl}/console/sign-in`, signInForm({ credential: API_KEY, name: "Kim", next: "/console/waits" }));
      expect(res.headers.getSetCookie()[0]).toMatch(/; Secure/);
    } finally {
      await secure.close();
    }
  });
});

describe("sign-in attempts are rate-limited per address", () => {
  // Last in the file: it spends this address's sign-in budget.
  it("past 10 failures, 429 with Retry-After, and then the right key does not get through either", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await get("/console/sign-in", signInForm({ credential: `guess-${i}`, name: "x", next: "/console" }))).status);
    // The wrong-credential test above failed once already: its failure counts too.
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(10);
    expect(statuses.slice(-1)).toEqual([429]);
    const res = await get("/console/sign-in", signInForm({ credential: API_KEY, name: "Kim", next: "/console" }));
    expect(res.status).toBe(429);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(res.headers.getSetCookie()).toEqual([]);
  });
});
