import { SignJWT } from "jose";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { signInForm } from "./console-client.ts";

// The operator's name is recorded (jsonb) on what they do: a name Postgres cannot store (a lone
// UTF-16 surrogate, which a JWT's JSON may hold as "\ud800") is refused at sign-in, rather than
// signing in an operator whose every run-control form would then be a 500.
const JWT_SECRET = "console-test-jwt-secret-0123456789abcdef";
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false, env: { SIGNALBOX_JWT_SECRET: JWT_SECRET } });
});
afterAll(async () => {
  await app?.close();
});

const token = (claims: Record<string, unknown>) =>
  new SignJWT(claims).setProtectedHeader({ alg: "HS256" }).setExpirationTime("1h").sign(new TextEncoder().encode(JWT_SECRET));

it("a token whose subject Postgres cannot store is refused at sign-in, saying why", async () => {
  const res = await fetch(app.baseUrl + "/console/sign-in", signInForm({ credential: await token({ sub: "kim\ud800" }), next: "/console/waits" }));
  const html = await res.text();
  expect(res.status, html).toBe(401);
  expect(res.headers.getSetCookie()).toEqual([]);
  expect(html).toContain("cannot be recorded");
});

it("a storable email claim is used when the subject is not", async () => {
  const res = await fetch(app.baseUrl + "/console/sign-in", signInForm({ credential: await token({ sub: "kim\ud800", email: "kim@example.com" }), next: "/console/waits" }));
  expect(res.status).toBe(303);
});

it("a signed-in operator's run-control forms never answer 5xx", async () => {
  const signIn = await fetch(app.baseUrl + "/console/sign-in", signInForm({ credential: await token({ sub: "kim" }), next: "/console/waits" }));
  expect(signIn.status).toBe(303);
  const cookie = signIn.headers.getSetCookie()[0]!.split(";")[0]!;
  const page = await (await fetch(app.baseUrl + "/console/waits", { headers: { cookie } })).text();
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page)![1]!;
  for (const verb of ["pause", "cancel"]) {
    const res = await fetch(`${app.baseUrl}/console/runs/r-${verb}/${verb}`, {
      method: "POST",
      headers: { cookie, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ _csrf: csrf }),
      redirect: "manual",
    });
    expect(res.status, `${verb}: ${(await res.text()).slice(0, 100)}`).toBeLessThan(500);
  }
});
