import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { signInForm } from "./console-client.ts";

// Behind a trusted proxy, one client on one IPv6 /64 (a single home or VM gets 2^64 addresses)
// guesses console credentials, each guess from a new address of the same /64: throttled as one.
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false, env: { SIGNALBOX_TRUSTED_PROXIES: "127.0.0.1,::1,::ffff:127.0.0.1" } });
});
afterAll(async () => {
  await app?.close();
});

const guessFrom = (address: string, i: number) =>
  fetch(`${app.baseUrl}/console/sign-in`, {
    ...signInForm({ credential: `guess-${i}`, name: "x", next: "/console" }),
    headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": address },
  });

it("failed sign-ins from one IPv6 /64 are throttled together, as from one address", async () => {
  const statuses: number[] = [];
  for (let i = 1; i <= 11; i++) statuses.push((await guessFrom(`2001:db8:1:2::${i.toString(16)}`, i)).status);
  // From one address, the 11th failure is a 429 (see sign-in-and-safety.test.ts).
  expect(statuses).toEqual([...Array(10).fill(401), 429]);
  // Written out in full, or in another case, it is the same /64; the next /64 is not.
  expect((await guessFrom("2001:0DB8:0001:0002:ffff:0:0:1", 12)).status).toBe(429);
  expect((await guessFrom("2001:db8:1:3::1", 13)).status).toBe(401);
});

it("an IPv4-mapped IPv6 address counts as its IPv4 address", async () => {
  for (let i = 1; i <= 10; i++) expect((await guessFrom("192.0.2.44", i)).status).toBe(401);
  expect((await guessFrom("::ffff:192.0.2.44", 11)).status).toBe(429);
  expect((await guessFrom("::ffff:c000:22c", 12)).status).toBe(429); // 192.0.2.44 in hex
});
