import { execFile } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver, type ReceivedCallback } from "../helpers/callback-receiver.ts";
import { declareType, openWait } from "../helpers/http.ts";
import { CALLBACK_SECRET, startTestApp, type TestApp } from "../helpers/test-app.ts";

/**
 * README "Resuming your engine" tells engine authors how to verify a callback. Its recipes are
 * run here on a real callback from a live signalbox: the plain-HMAC Python function exactly as
 * the README prints it, and the `standardwebhooks` call it shows for TypeScript.
 */
const readme = await fs.readFile(path.resolve(import.meta.dirname, "../../README.md"), "utf8");
const section = readme.slice(readme.indexOf("## Resuming your engine"), readme.indexOf("## Command line"));
const pythonBlocks = [...section.matchAll(/```python\n([\s\S]*?)```/g)].map((m) => m[1]!.replace(/^ {2}/gm, ""));
const plainHmac = pythonBlocks.find((b) => b.includes("def verify_signalbox"));

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
let callback: ReceivedCallback;
let dir: string;

beforeAll(async () => {
  app = await startTestApp();
  engine = await startCallbackReceiver();
  await declareType(app, "approval");
  const { body: wait } = await openWait(app, "order-17", { signal: "approval", callback_url: engine.url }, 201);
  await app.api("/signals/order-17/approval", { method: "POST", json: { approved: true, note: "ünïcode survives" } });
  callback = (await engine.waitFor(1))[0]!;
  expect(callback.json.wait.id).toBe(wait.id);
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "sbx-resume-docs-"));
});

afterAll(async () => {
  await engine?.close();
  await app?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

/** Runs the README's Python function on a callback's headers and body; prints True or False. */
async function pythonVerifies(headers: Record<string, string>, body: string, secret = CALLBACK_SECRET): Promise<string> {
  await fs.writeFile(path.join(dir, "callback.json"), JSON.stringify({ headers, body }));
  const driver = `${plainHmac}
import json, sys
cb = json.load(open(sys.argv[1]))
print(verify_signalbox(sys.argv[2], cb["headers"], cb["body"].encode()))
`;
  await fs.writeFile(path.join(dir, "verify.py"), driver);
  const { stdout } = await promisify(execFile)("python3", [path.join(dir, "verify.py"), path.join(dir, "callback.json"), secret]);
  return stdout.trim();
}

const headersOf = (cb: ReceivedCallback) => ({
  "webhook-id": String(cb.headers["webhook-id"]),
  "webhook-timestamp": String(cb.headers["webhook-timestamp"]),
  "webhook-signature": String(cb.headers["webhook-signature"]),
});

describe("README: Resuming your engine", () => {
  it("the callback has the headers and body the README shows", () => {
    expect(callback.headers["content-type"]).toBe("application/json");
    expect(callback.headers["user-agent"]).toBe("signalbox");
    expect(callback.headers["webhook-id"]).toBe(callback.json.id);
    expect(String(callback.headers["webhook-signature"])).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(callback.json).toMatchObject({ type: "signal.received", wait: { status: "received", result: { payload: { approved: true } } } });
  });

  it("its plain-HMAC Python function accepts the real callback, and refuses it altered, replayed late, or checked with another secret", async () => {
    expect(plainHmac).toBeDefined();
    expect(await pythonVerifies(headersOf(callback), callback.body)).toBe("True");
    expect(await pythonVerifies(headersOf(callback), callback.body.replace("true", "false"))).toBe("False");
    // Correctly signed, ten minutes ago: refused for its age alone.
    const tenMinutesAgo = new Date(Date.now() - 600_000);
    const stale = {
      "webhook-id": callback.json.id,
      "webhook-timestamp": String(Math.floor(tenMinutesAgo.getTime() / 1000)),
      "webhook-signature": new Webhook(CALLBACK_SECRET).sign(callback.json.id, tenMinutesAgo, callback.body),
    };
    expect(await pythonVerifies(stale, callback.body)).toBe("False");
    expect(await pythonVerifies(headersOf(callback), callback.body, "whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBrZXkh")).toBe("False");
  });

  it("its standardwebhooks call for TypeScript returns the event", () => {
    expect(new Webhook(CALLBACK_SECRET).verify(callback.body, headersOf(callback))).toEqual(callback.json);
  });
});
