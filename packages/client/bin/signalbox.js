#!/usr/bin/env node
// The `signalbox` command. Installed from npm it runs the build (dist/); in a checkout, where
// src/ is (it is not published), it runs the TypeScript sources when this Node strips types
// (22.18+), so the command is never older than its sources.
import { existsSync } from "node:fs";

const source = new URL("../src/cli/run.ts", import.meta.url);
const built = new URL("../dist/cli/run.js", import.meta.url);
const entry = existsSync(source) && process.features.typescript ? source : built;
if (!existsSync(entry)) {
  process.stderr.write("signalbox: not built: run `npm run build -w @signalbox/client`, or use Node.js 22.18 or newer\n");
  process.exit(1);
}
await import(entry.href);
