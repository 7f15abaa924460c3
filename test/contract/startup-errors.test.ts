import { createServer, type Server } from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../src/core/free-port.ts";
import { killServices, spawnService } from "../helpers/service-process.ts";
import { createTestDatabase } from "../helpers/test-app.ts";

// What an operator sees when a start cannot work: exit 1 and one line that names the setting to
// fix, no stack trace. Real processes, as `npm start` runs them.

afterAll(() => killServices());

async function failedStart(env: Record<string, string>, port?: number): Promise<string[]> {
  const svc = await spawnService(env, port);
  expect(await svc.exited, svc.output()).toBe(1);
  const lines = svc.output().trim().split("\n");
  expect(lines.filter((l) => /^\s+at /.test(l) || l.includes('"stack"'))).toEqual([]);
  return lines;
}

describe("a start that cannot work says what to fix in one line", () => {
  const refused = async () => `postgres://signalbox:secret@127.0.0.1:${await freePort()}/signalbox`;

  it.concurrent.each([
    ["a malformed DATABASE_URL", { DATABASE_URL: "localhost:5432/signalbox" }, /^invalid configuration: DATABASE_URL: /],
    ["a DATABASE_URL of another kind", { DATABASE_URL: "mysql://root@localhost/signalbox" }, /^invalid configuration: DATABASE_URL: postgres:\/\//],
    ["a SIGNALBOX_SECRET_KEY of the wrong size", { SIGNALBOX_SECRET_KEY: "c2hvcnQ=" }, /^invalid configuration: SIGNALBOX_SECRET_KEY: must be 32 bytes/],
    ["a SIGNALBOX_API_KEYS key with a space", { SIGNALBOX_API_KEYS: "good-key,bad key" }, /^invalid configuration: SIGNALBOX_API_KEYS: /],
    ["a SIGNALBOX_LINK_KEYS secret too short", { SIGNALBOX_LINK_KEYS: "k1:too-short" }, /^invalid configuration: SIGNALBOX_LINK_KEYS: the secret of key 'k1' must be at least 32 bytes/],
    ["a SIGNALBOX_LINK_KEYS entry without a kid", { SIGNALBOX_LINK_KEYS: "0123456789abcdef0123456789abcdef" }, /^invalid configuration: SIGNALBOX_LINK_KEYS: each key must be kid:secret/],
  ])("%s", async (_what, env, expected) => {
    const lines = await failedStart({ DATABASE_URL: await refused(), ...env });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(expected);
    expect(lines[0]).not.toContain("secret@"); // the URL's password is never printed
  });

  it("a DATABASE_URL where nothing listens", async () => {
    const lines = await failedStart({ DATABASE_URL: await refused() });
    expect(lines).toEqual([expect.stringMatching(/^cannot connect to DATABASE_URL: nothing accepts connections at 127\.0\.0\.1:\d+\/signalbox \(connection refused\): check DATABASE_URL/)]);
  });

  it("a PORT already in use", async () => {
    const db = await createTestDatabase();
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, "0.0.0.0", r));
    try {
      const port = (taken.address() as { port: number }).port;
      const lines = await failedStart({ DATABASE_URL: db.url, LOG_LEVEL: "warn" }, port);
      expect(lines.filter((l) => !l.startsWith("{"))).toEqual([`PORT ${port} is already in use (EADDRINUSE): stop the process listening there, or set PORT to a free port`]);
    } finally {
      taken.close();
      await db.drop();
    }
  }, 30_000);
});
