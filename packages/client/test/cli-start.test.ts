import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../../src/core/free-port.ts";
import { processAlive } from "../../../test/helpers/service-process.ts";
import { API_KEY, CALLBACK_SECRET, createTestDatabase } from "../../../test/helpers/test-app.ts";
import { waitFor } from "../../../test/helpers/wait-for.ts";
import { collect, runCli, spawnCli } from "./helpers/run-cli.ts";

const dropped: Array<() => Promise<void>> = [];
const pids: number[] = [];
afterAll(async () => {
  for (const pid of pids) if (processAlive(pid)) process.kill(pid, "SIGKILL");
  for (const drop of dropped) await drop();
});

/** `signalbox start` on a fresh database and a free port, once /readyz answers 200. */
async function startedCli() {
  const db = await createTestDatabase();
  dropped.push(db.drop);
  const port = await freePort();
  const child = spawnCli(["start", "--port", String(port), "--database-url", db.url], { SIGNALBOX_API_KEYS: API_KEY, SIGNALBOX_CALLBACK_SECRET: CALLBACK_SECRET });
  pids.push(child.pid!);
  const out = collect(child);
  let exited = false;
  const code = new Promise<number | null>((resolve) => child.once("close", (c) => ((exited = true), resolve(c))));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor("/readyz to answer 200", async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status, {
      until: (status) => status === 200,
      timeoutMs: 60_000,
      gaveUp: () => (exited ? "signalbox start exited" : undefined),
      context: () => out.stdout() + out.stderr(),
    });
  } catch (err) {
    child.kill("SIGTERM");
    throw err;
  }
  return { child, out, code, url };
}

describe("signalbox start", () => {
  it("runs the service until SIGTERM, which it passes on, and exits 0 after the clean stop", async () => {
    const { child, out, code, url } = await startedCli();
    try {
      expect(await runCli(["waits", "ls", "--url", url, "--token", API_KEY])).toMatchObject({ code: 0 });
    } finally {
      child.kill("SIGTERM");
    }
    expect(await code).toBe(0);
    expect(out.stdout()).toContain('"signalbox listening"');
  }, 90_000);

  // A SIGINT sent to the command's pid alone (a supervisor, `kill -INT`, a tool that stops its
  // children with SIGINT) must stop the service too, not leave the command waiting forever on a
  // service that never heard it.
  it("stops the service and exits 0 on a SIGINT sent to its pid alone", async () => {
    const { child, out, code, url } = await startedCli();
    const servicePid = Number(/"pid":(\d+)/.exec(out.stdout())?.[1]);
    if (servicePid) pids.push(servicePid);

    child.kill("SIGINT");
    const ended = await Promise.race([code.then((c) => `exited ${c}`), new Promise<string>((r) => setTimeout(() => r("still running after 15 s"), 15_000))]);
    const serviceAnswers = (await fetch(`${url}/healthz`).catch(() => undefined))?.status ?? "no answer";
    child.kill("SIGTERM"); // clean up either way
    expect({ ended, serviceAnswers }, out.stdout() + out.stderr()).toEqual({ ended: "exited 0", serviceAnswers: "no answer" });
  }, 120_000);

  it("exits 2 when the directory it is told to run is not a signalbox checkout", async () => {
    const res = await runCli(["start", "--service-dir", "/tmp"]);
    expect(res).toMatchObject({ code: 2, stderr: expect.stringContaining("/tmp is not a signalbox service checkout") });
  });
});
