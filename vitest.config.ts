import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globalSetup: ["./test/helpers/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        test: {
          name: "suite",
          include: ["test/**/*.test.ts", "packages/*/test/**/*.test.ts"],
          exclude: [...configDefaults.exclude, "test/faults/**"],
          // Each file gets its own database cloned from a migrated template, so files run in parallel.
          fileParallelism: true,
          sequence: { groupOrder: 0 },
        },
      },
      {
        // Fault tests restart and kill a Postgres of their own under load and time every answer:
        // they run after the rest, one file at a time, so other files do not skew their timings.
        extends: true,
        test: { name: "faults", include: ["test/faults/**/*.test.ts"], fileParallelism: false, sequence: { groupOrder: 1 } },
      },
    ],
  },
});
