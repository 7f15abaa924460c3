import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { expect, it } from "vitest";

const packageDir = path.resolve(import.meta.dirname, "..");
const committed = path.join(packageDir, "src/generated/openapi.ts");

// The SDK is typed from openapi/openapi.json; when the document changes (npm run openapi), the
// types must follow in the same commit, or the SDK would describe an API that no longer exists.
it("src/generated/openapi.ts is what openapi-typescript makes of openapi/openapi.json today", async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "sbx-client-types-"));
  try {
    const fresh = path.join(dir, "openapi.ts");
    const bin = path.resolve(packageDir, "../../node_modules/.bin/openapi-typescript");
    await promisify(execFile)(process.execPath, [bin, "../../openapi/openapi.json", "-o", fresh], { cwd: packageDir });
    const [want, have] = await Promise.all([fs.readFile(fresh, "utf8"), fs.readFile(committed, "utf8")]);
    expect(have === want, "packages/client/src/generated/openapi.ts is stale: run `npm run generate -w @signalbox/client` (or `npm run openapi`)").toBe(true);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}, 60_000);
