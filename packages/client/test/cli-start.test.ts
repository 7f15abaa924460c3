import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../../src/core/free-port.ts";
import { API_KEY, CALLBACK_SECRET, createTestDatabase } from "../../../test/helpers/test-app.ts";
import { waitFor } from "../../../test/helpers/wait-for.ts";
import { collect, runCli, spawnCli } from "./helpers/run-cli.ts";

const dropped: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const drop of dropped) await drop();
});

describe("signalbox start", () => {
  it("runs the service until SIGTERM, which it passes on, and exits 0 after the clean stop", async () => {
    const db = await createTestDatabase();
    dropped.push(db.drop);
    const port = await freePort();
    const child = spawnCli(["start", "--port", String(port), "--database-url", db.url], { SIGNALBOX_API_KEYS: API_KEY, SIGNALBOX_CALLBACK_SECRET: CALLBACK_SECRET });
    const out = collect(child);
    let exited = false;
    const code = new Promise<number | null>((resolve) => child.once("close", (c) => ((exited = true), resolve(c))));
    try {
      const url = `http://127.0.0.1:${port}`;
      await waitFor("/readyz to answer 200", async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status, {
        until: (status) => status === 200,
        timeoutMs: 60_000,
        gaveUp: () => (exited ? "signalbox start exited" : undefined),
        context: () => out.stdout() + out.stderr(),
      });
      expect(await runCli(["waits", "ls", "--url", url, "--token", API_KEY])).toMatchObject({ code: 0 });
    } finally {
      child.kill("SIGTERM");
    }
    expect(await code).toBe(0);
    expect(out.stdout()).toContain('"signalbox listening"');
  }, 90_000);

  it("exits 2 when the directory it is told to run is not a signalbox checkout", async () => {
    const res = await runCli(["start", "--service-dir", "/tmp"]);
    expect(res).toMatchObject({ code: 2, stderr: expect.stringContaining("/tmp is not a signalbox service checkout") });
  });
});
