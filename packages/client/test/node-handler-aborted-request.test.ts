// A callback endpoint built as the README shows (http.createServer(nodeCallbackHandler(...)))
// must survive a client that sends half a body and hangs up: anyone who can reach the engine
// can do that, before any signature is checked. http.createServer drops the promise the
// handler returns, so a rejection there is unhandled and ends the engine's process.
import { spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NODE } from "../../../test/helpers/service-process.ts";
import { API_KEY, CALLBACK_SECRET, startTestApp, type TestApp } from "../../../test/helpers/test-app.ts";
import { waitFor } from "../../../test/helpers/wait-for.ts";
import { createClient } from "../src/index.ts";

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

describe("nodeCallbackHandler and a request cut off mid-body", () => {
  it("keeps the engine up, so the next genuine callback is delivered", async () => {
    const engine = spawn(NODE, [path.join(import.meta.dirname, "fixtures/engine.ts")], {
      env: { PATH: process.env.PATH, SIGNALBOX_CALLBACK_SECRET: CALLBACK_SECRET },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    engine.stdout!.on("data", (d: Buffer) => (out += d.toString()));
    engine.stderr!.on("data", (d: Buffer) => (out += d.toString()));
    let exitCode: number | null | undefined;
    engine.once("exit", (code) => (exitCode = code));
    try {
      const port = Number(await waitFor("the engine to listen", () => /listening (\d+)/.exec(out)?.[1], { gaveUp: () => (exitCode !== undefined ? "exited" : undefined) }));

      // Anonymous: announces 100 bytes, sends 3, hangs up.
      await new Promise<void>((resolve) => {
        const s = net.connect(port, "127.0.0.1", () => {
          s.write('POST /signalbox HTTP/1.1\r\nHost: engine\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a');
          setTimeout(() => (s.destroy(), resolve()), 100);
        });
      });
      await new Promise((r) => setTimeout(r, 500));

      // Then signalbox resumes a run through this engine.
      const client = createClient({ baseUrl: app.baseUrl, token: API_KEY });
      await client.signalTypes.put("approval", { auth: { scheme: "none" } });
      const wait = await client.waits.open("run-aborted-1", { signal: "approval", callback_url: `http://127.0.0.1:${port}/signalbox` });
      await client.signals.send("run-aborted-1", "approval", { ok: true });
      const delivery = await waitFor("the callback's delivery to settle", async () => (await client.waits.get(wait.id)).delivery, {
        until: (d) => d.status === "delivered" || d.status === "failed" || d.attempts >= 3,
        timeoutMs: 15_000,
      });
      expect({ engineExit: exitCode ?? "running", delivery: delivery.status }, out).toEqual({ engineExit: "running", delivery: "delivered" });
    } finally {
      engine.kill("SIGKILL");
    }
  });
});
