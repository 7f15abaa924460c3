import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { answers200, killServices, spawnService } from "../helpers/service-process.ts";

// The embedded Postgres killed under a running signalbox (the OOM killer, an operator): nothing
// in the process can bring it back, so it exits for its supervisor instead of serving 503s for good.
const dirs: string[] = [];
afterAll(async () => {
  killServices();
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

it("signalbox exits (code 1, a fatal line) when its embedded Postgres dies", async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-pgdies-"));
  await fs.chmod(dir, 0o755);
  dirs.push(dir);
  const svc = await spawnService({ SIGNALBOX_DATA_DIR: path.join(dir, "data"), LOG_LEVEL: "info" });
  await answers200(svc, "/readyz", 90_000);
  const postmaster = Number((await fs.readFile(path.join(dir, "data", "pg", "postmaster.pid"), "utf8")).split("\n")[0]);
  expect(postmaster).toBeGreaterThan(0);
  process.kill(postmaster, "SIGKILL");
  const exitedWithin = await Promise.race([svc.exited, new Promise((r) => setTimeout(() => r("still running"), 10_000))]);
  expect(exitedWithin).toBe(1);
  expect(svc.logs().some((l) => l.level === 60 && String(l.msg).includes("the embedded Postgres exited by itself"))).toBe(true);
}, 120_000);
