import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY, startTestApp, type TestApp } from "../../../test/helpers/test-app.ts";

/**
 * What `npm publish` would ship, used as a user would: `npm pack` (which builds dist/ through
 * `prepack`), the tarball unpacked into a node_modules, then its command run and its module
 * imported and type-checked from outside the workspace's sources. The other tests run the
 * TypeScript sources; this one proves the build matches them.
 */
const run = promisify(execFile);
const packageDir = path.resolve(import.meta.dirname, "..");
const repoDir = path.resolve(packageDir, "../..");
const bin = (name: string) => path.join(repoDir, "node_modules/.bin", name);

let app: TestApp;
let dir: string;
let installed: string;
let packed: string[];

beforeAll(async () => {
  await fs.mkdir(path.join(packageDir, "test/.tmp"), { recursive: true });
  // Inside the repository, so the unpacked package finds its dependency (openapi-fetch) in the
  // root node_modules, as it would in the node_modules of a project that installed it.
  dir = await fs.mkdtemp(path.join(packageDir, "test/.tmp/pack-"));
  const { stdout } = await run("npm", ["pack", "--json", "--pack-destination", dir], {
    cwd: packageDir,
    env: { ...process.env, PATH: `${path.join(repoDir, "node_modules/.bin")}:${process.env.PATH}` },
  });
  const [result] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  packed = result!.files.map((f) => f.path);
  installed = path.join(dir, "node_modules/@signalbox/client");
  await fs.mkdir(installed, { recursive: true });
  await run("tar", ["-xzf", path.join(dir, result!.filename), "-C", installed, "--strip-components=1"]);
  await fs.writeFile(path.join(dir, "package.json"), JSON.stringify({ type: "module", private: true }));
  app = await startTestApp();
}, 120_000);

afterAll(async () => {
  await app?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

describe("the published package", () => {
  it("ships the build, the command and the README, not the sources or tests", () => {
    expect(packed).toEqual(expect.arrayContaining(["package.json", "README.md", "bin/signalbox.js", "dist/index.js", "dist/index.d.ts", "dist/cli/run.js"]));
    expect(packed.filter((p) => p.startsWith("src/") || p.startsWith("test/"))).toEqual([]);
  });

  it("its signalbox command runs the build against a live server", async () => {
    const help = await run(process.execPath, [path.join(installed, "bin/signalbox.js"), "--help"]);
    expect(help.stdout).toContain("usage: signalbox <command>");
    const version = await run(process.execPath, [path.join(installed, "bin/signalbox.js"), "--version"]);
    const { version: packedVersion } = JSON.parse(await fs.readFile(path.join(installed, "package.json"), "utf8")) as { version: string };
    expect(version.stdout).toBe(`${packedVersion}\n`);
    const ls = await run(process.execPath, [path.join(installed, "bin/signalbox.js"), "waits", "ls", "--json", "--url", app.baseUrl, "--token", API_KEY]);
    expect(JSON.parse(ls.stdout)).toEqual([]);
  });

  it("its module works when imported by name: open a wait, send the signal, wait for it, verify a callback", async () => {
    const program = `
      import { createClient, signCallback, verifyCallback } from "@signalbox/client";
      const [baseUrl, token] = process.argv.slice(2);
      const sb = createClient({ baseUrl, token });
      await sb.signalTypes.put("go", { auth: { scheme: "none" } });
      const wait = await sb.waits.open("pkg-1", { signal: "go" });
      const sent = await sb.signals.send("pkg-1", "go", { ok: true });
      const done = await sb.waits.waitFor(wait.id, { timeoutMs: 10000 });
      const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
      const body = JSON.stringify({ id: "ev_1", type: "signal.received", occurred_at: new Date().toISOString(), wait: done });
      const event = await verifyCallback(await signCallback(secret, "ev_1", body), body, secret);
      console.log(JSON.stringify({ outcome: sent.outcome, status: done.status, event: event.type }));
    `;
    await fs.writeFile(path.join(dir, "program.mjs"), program);
    const { stdout } = await run(process.execPath, [path.join(dir, "program.mjs"), app.baseUrl, API_KEY], { cwd: dir });
    expect(JSON.parse(stdout)).toEqual({ outcome: "received", status: "received", event: "signal.received" });
  });

  it("its types check the README's engine-side example, as a user's strict project would", async () => {
    const readme = await fs.readFile(path.join(packageDir, "README.md"), "utf8");
    const section = readme.slice(readme.indexOf("## Two minutes"), readme.indexOf("## The client"));
    const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
    expect(blocks.length).toBe(2);
    await fs.writeFile(path.join(dir, "example.ts"), `${blocks.join("\n")}\nexport {};\n`);
    const tsconfig = {
      compilerOptions: { target: "es2022", module: "nodenext", moduleResolution: "nodenext", strict: true, noEmit: true, skipLibCheck: false, types: ["node"] },
      files: ["example.ts"],
    };
    await fs.writeFile(path.join(dir, "tsconfig.json"), JSON.stringify(tsconfig));
    const result = await run(process.execPath, [bin("tsc"), "-p", dir]).then(
      () => "",
      (err: { stdout?: string }) => err.stdout ?? String(err),
    );
    expect(result).toBe("");
  }, 60_000);
});
