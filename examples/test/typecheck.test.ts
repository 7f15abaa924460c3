import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { describe, it } from "vitest";
import { EXAMPLES, NODE } from "./helpers.ts";

// Every example type-checks against the packages its lockfile installs, with its own TypeScript.
// For the Temporal example this is the whole check: no Temporal server runs here.
const examples = fs.readdirSync(EXAMPLES).filter((d) => fs.existsSync(path.join(EXAMPLES, d, "tsconfig.json")));

describe("the examples type-check", () => {
  it.each(examples)("%s", async (dir) => {
    const cwd = path.join(EXAMPLES, dir);
    await promisify(execFile)(NODE, [path.join(cwd, "node_modules/typescript/bin/tsc"), "--noEmit", "-p", cwd], { cwd }).catch((err: { stdout?: string; message: string }) => {
      throw new Error(`tsc in examples/${dir}:\n${err.stdout || err.message}`);
    });
  });
});
