import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { killServices, processAlive, spawnService } from "../helpers/service-process.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Ctrl-C pressed twice during a slow embedded start (as after shutdown, where a second signal
// exits at once but still stops Postgres through the exit hook).
const dirs: string[] = [];
let orphan: number | undefined;
afterAll(async () => {
  killServices();
  if (orphan) {
    try {
      process.kill(orphan, "SIGKILL");
    } catch {}
  }
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

it("a second SIGINT while starting does not leave the embedded Postgres running", async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-dblint-"));
  await fs.chmod(dir, 0o755);
  dirs.push(dir);
  const svc = await spawnService({ SIGNALBOX_DATA_DIR: path.join(dir, "data"), LOG_LEVEL: "trace" });
  // The postmaster is starting (its first line of output), not yet ready.
  await waitFor("the embedded Postgres starting", () => svc.logs().some((l) => l.msg === "embedded postgres") || !svc.alive(), { intervalMs: 1, timeoutMs: 60_000 });
  svc.child.kill("SIGINT");
  await new Promise((r) => setTimeout(r, 20));
  svc.child.kill("SIGINT");
  expect(await svc.exited).toBe(1);
  await new Promise((r) => setTimeout(r, 3000));
  const pidFile = await fs.readFile(path.join(dir, "data", "pg", "postmaster.pid"), "utf8").catch(() => "");
  const postmaster = Number(pidFile.split("\n")[0]);
  if (postmaster && processAlive(postmaster)) orphan = postmaster;
  expect(Boolean(postmaster) && processAlive(postmaster), `postmaster ${postmaster} still running 3 s after signalbox exited\n${svc.output()}`).toBe(false);
}, 90_000);
