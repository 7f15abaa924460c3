import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, expect, it } from "vitest";
import { killServices, spawnService, answers200 } from "../helpers/service-process.ts";

// Start, ready, SIGTERM, again, on one data dir: every start must come up (the sweep scheduled
// at start once died on `add_job returned no job` when a worker locked the pending sweep job
// mid-call, graphile/worker#580). 10 rounds in `npm test`; RESTART_LOOP_COUNT=50 for the long run.
const ROUNDS = Number(process.env.RESTART_LOOP_COUNT ?? 10);

let home: string;
afterAll(async () => {
  killServices();
  if (home) await fs.rm(home, { recursive: true, force: true });
});

it(`restarts one embedded data dir ${ROUNDS} times, ready every time`, async () => {
  home = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-restarts-"));
  await fs.chmod(home, 0o755);
  const env = { SIGNALBOX_DATA_DIR: path.join(home, "data") };
  const readyMs: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const began = performance.now();
    const svc = await spawnService(env);
    try {
      await answers200(svc, "/readyz");
    } catch (err) {
      throw new Error(`round ${round}: ${(err as Error).message}`);
    }
    readyMs.push(performance.now() - began);
    svc.child.kill("SIGTERM");
    expect(await svc.exited, `round ${round}:\n${svc.output()}`).toBe(0);
    expect(svc.output(), `round ${round}`).not.toMatch(/add_job returned no job|"level":50/);
  }
  readyMs.sort((a, b) => a - b);
  console.log(`${ROUNDS} restarts: ready in median ${Math.round(readyMs[readyMs.length >> 1]!)} ms, max ${Math.round(readyMs.at(-1)!)} ms`);
}, 60_000 + ROUNDS * 10_000);
