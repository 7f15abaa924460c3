import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../../src/core/free-port.ts";
import { API_KEY, startTestApp, type TestApp } from "../../../test/helpers/test-app.ts";
import { runCli } from "./helpers/run-cli.ts";

const COMMANDS = [["start"], ["types", "apply"], ["waits", "ls"], ["waits", "show"], ["send"], ["tail"], ["deliveries", "ls"], ["redeliver"], ["redrive"]];

describe("signalbox --help and usage errors", () => {
  it("lists every command and the exit codes", async () => {
    const { code, stdout } = await runCli(["--help"]);
    expect(code).toBe(0);
    for (const name of COMMANDS) expect(stdout).toContain(`  ${name.join(" ")}`);
    expect(stdout).toMatch(/Exit codes:\n  0 .*\n  1 .*\n  2 .*\n  3 /);
  });

  it("--version prints the package's version", async () => {
    const { version } = JSON.parse(await fs.readFile(path.resolve(import.meta.dirname, "../package.json"), "utf8")) as { version: string };
    expect(await runCli(["--version"])).toMatchObject({ code: 0, stdout: `${version}\n` });
  });

  it.each(COMMANDS)("%s %s --help explains the command, its options and the exit codes", async (...name) => {
    const { code, stdout } = await runCli([...name.filter(Boolean), "--help"]);
    expect(code).toBe(0);
    expect(stdout).toContain(`usage: signalbox ${name.filter(Boolean).join(" ")}`);
    expect(stdout).toContain("Exit codes:");
  });

  it("exits 2, naming the mistake, for no command, an unknown command or flag, and a missing or extra argument", async () => {
    expect((await runCli([])).code).toBe(2);
    const unknown = await runCli(["wait", "ls"]);
    expect(unknown).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command "wait ls"') });
    const flag = await runCli(["waits", "ls", "--bogus"]);
    expect(flag).toMatchObject({ code: 2, stderr: expect.stringContaining("Unknown option '--bogus'") });
    expect(flag.stderr).toContain("usage: signalbox waits ls [options]");
    expect(await runCli(["send", "order-17"])).toMatchObject({ code: 2, stderr: expect.stringContaining("missing <signal>") });
    expect(await runCli(["waits", "show", "a", "b"])).toMatchObject({ code: 2, stderr: expect.stringContaining('unexpected argument "b"') });
    expect(await runCli(["waits", "ls", "--status", "open"])).toMatchObject({ code: 2, stderr: expect.stringContaining("--status must be one of") });
    expect(await runCli(["waits", "ls", "--due-before", "tomorrow"])).toMatchObject({ code: 2, stderr: expect.stringContaining("--due-before takes") });
    expect(await runCli(["send", "r", "s", "--data", "{nope"])).toMatchObject({ code: 2, stderr: expect.stringContaining("--data is not JSON") });
    // Refused before anything is sent: not "signalbox unreachable" (3), which says to try again.
    const key = await runCli(["send", "r", "s", "--idempotency-key", "订单-17", "--url", "http://127.0.0.1:1"]);
    expect(key).toMatchObject({ code: 2, stderr: expect.stringContaining("--idempotency-key") });
    expect(key.stderr).not.toMatch(/unreachable|    at /);
    expect(await runCli(["send", "r", "s", "--idempotency-key", ""])).toMatchObject({ code: 2, stderr: expect.stringContaining("--idempotency-key") });
  });

  it("exits 3 when nothing answers at the URL", async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    const res = await runCli(["waits", "ls", "--url", url, "--token", "x"]);
    expect(res).toMatchObject({ code: 3, stderr: `error: signalbox unreachable at ${url}: ECONNREFUSED\n` });
  });
});

describe("where the CLI finds its signalbox and token", () => {
  let app: TestApp;
  let dir: string;

  beforeAll(async () => {
    app = await startTestApp();
    dir = await fs.mkdtemp(path.join(os.tmpdir(), "sbx-cli-config-"));
  });
  afterAll(async () => {
    await app?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  it("flags, then SIGNALBOX_URL and SIGNALBOX_TOKEN; a wrong token exits 1 and says where tokens come from", async () => {
    expect((await runCli(["waits", "ls", "--url", app.baseUrl, "--token", API_KEY])).code).toBe(0);
    expect((await runCli(["waits", "ls"], { env: { SIGNALBOX_URL: app.baseUrl, SIGNALBOX_TOKEN: API_KEY } })).code).toBe(0);
    const wrong = await runCli(["waits", "ls", "--token", "nope"], { env: { SIGNALBOX_URL: app.baseUrl, SIGNALBOX_TOKEN: API_KEY } });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^error: 401 /);
    expect(wrong.stderr).toContain("check --token, SIGNALBOX_TOKEN or the profile's token");
  });

  it("a profile file, with the token read from the variable it names", async () => {
    const file = path.join(dir, "config.json");
    await fs.writeFile(file, JSON.stringify({ profiles: { default: { url: "http://127.0.0.1:1" }, test: { url: app.baseUrl, token: "env:TEST_TOKEN" } } }));
    expect((await runCli(["waits", "ls", "--config", file, "--profile", "test"], { env: { TEST_TOKEN: API_KEY } })).code).toBe(0);
    expect((await runCli(["waits", "ls"], { env: { SIGNALBOX_CONFIG: file, SIGNALBOX_PROFILE: "test", TEST_TOKEN: API_KEY } })).code).toBe(0);
    expect(await runCli(["waits", "ls", "--config", file, "--profile", "prod"])).toMatchObject({ code: 2, stderr: expect.stringContaining('no profile "prod"') });
    expect(await runCli(["waits", "ls", "--config", file, "--profile", "test"])).toMatchObject({ code: 2, stderr: expect.stringContaining("TEST_TOKEN, which is not set") });
  });

  it.each([
    ["holds null", "null", "not an object"],
    ["has profiles that are not an object", JSON.stringify({ profiles: [] }), '"profiles"'],
    ["has a profile that is not an object", JSON.stringify({ profiles: { default: "http://127.0.0.1:1" } }), '"profiles.default"'],
    ["has a token that is a number", JSON.stringify({ profiles: { default: { url: "http://127.0.0.1:1", token: 12345 } } }), '"profiles.default.token"'],
    ["has a url that is a number", JSON.stringify({ profiles: { default: { url: 8080 } } }), '"profiles.default.url"'],
  ])("a profile file that %s is a usage error naming the file and the field, not a crash", async (_what, text, field) => {
    const file = path.join(dir, "malformed.json");
    await fs.writeFile(file, text);
    const res = await runCli(["waits", "ls", "--config", file]);
    expect(res).toMatchObject({ code: 2, stderr: expect.stringContaining(file) });
    expect(res.stderr).toContain(field);
    expect(res.stderr).not.toMatch(/TypeError|    at /);
  });

  it("for a signalbox on this machine, the key it generated into the data dir of the current directory", async () => {
    await fs.mkdir(path.join(dir, ".signalbox"), { recursive: true });
    await fs.writeFile(path.join(dir, ".signalbox", "api-key"), `${API_KEY}\n`);
    expect((await runCli(["waits", "ls", "--url", app.baseUrl], { cwd: dir })).code).toBe(0);
    // Not sent anywhere else: another host gets no token from this machine's data dir.
    const elsewhere = await runCli(["waits", "ls", "--url", app.baseUrl.replace("127.0.0.1", "localhost")], { cwd: path.join(dir, "..") });
    expect(elsewhere.code).toBe(1);
  });
});
