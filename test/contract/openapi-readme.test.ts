import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { API_KEY, startTestApp, type TestApp } from "../helpers/test-app.ts";

/**
 * openapi/README.md promises that its TypeScript steps work as written from an empty directory.
 * This runs them so: its shell blocks with bash, its program saved as walkthrough.ts, in a fresh
 * directory outside the repository, against a live signalbox. npm installs from its cache when it
 * can (the packages are the repository's own dependencies), from the registry otherwise.
 */
const root = path.resolve(import.meta.dirname, "../..");
const readme = await fs.readFile(path.join(root, "openapi/README.md"), "utf8");
const section = readme.slice(readme.indexOf("## TypeScript: openapi-typescript + openapi-fetch"), readme.indexOf("## Python:"));
const blocks = [...section.matchAll(/```(sh|ts)\n([\s\S]*?)```/g)].map((m) => ({ lang: m[1], code: m[2]! }));

let app: TestApp;
let dir: string;

beforeAll(async () => {
  app = await startTestApp();
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "sbx-openapi-readme-"));
});

afterAll(async () => {
  await app?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

it("the TypeScript client steps of openapi/README.md work verbatim from an empty directory", async () => {
  expect(blocks.map((b) => b.lang)).toEqual(["sh", "ts", "sh"]);
  const env = {
    ...process.env,
    // Node 24 first, as it is for anyone who follows the README's "Node.js 22.18 or newer".
    PATH: `${path.join(root, "node_modules/.bin")}:${process.env.PATH}`,
    SIGNALBOX_URL: app.baseUrl,
    SIGNALBOX_TOKEN: API_KEY,
    npm_config_prefer_offline: "true",
    npm_config_audit: "false",
    npm_config_fund: "false",
    npm_config_update_notifier: "false",
  };
  const bash = (code: string) => promisify(execFile)("bash", ["-euo", "pipefail", "-c", code], { cwd: dir, env, maxBuffer: 16 * 1024 * 1024 });

  await bash(blocks[0]!.code);
  await fs.writeFile(path.join(dir, "walkthrough.ts"), blocks[1]!.code);
  const { stdout } = await bash(blocks[2]!.code);

  const lines = stdout.trim().split("\n");
  expect(lines[0]).toMatch(/^pending: \[ 'order-17 wt_\w+' \]$/);
  expect(lines.slice(1)).toEqual(["signal: received", "wait: received { approved: true }"]);
}, 240_000);
