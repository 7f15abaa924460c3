import path from "node:path";
import { defineConfig } from "vitest/config";

// The examples' tests, run by `npm run examples` at the repository root (after each example's
// `npm ci`). They reuse the suite's Postgres set-up: one embedded Postgres for the run (or
// DATABASE_URL), and a fresh database per signalbox and per example.
export default defineConfig({
  root: path.resolve(import.meta.dirname, ".."),
  test: {
    include: ["examples/test/**/*.test.ts"],
    globalSetup: ["./test/helpers/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
