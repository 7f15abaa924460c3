import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { signInConsole, type ConsoleClient } from "./console-client.ts";

// The signal type page's "Send one" example is a real request: copied as it is, with the run and
// the secret filled in, bash + openssl + curl send a signal that signalbox accepts.

const run = promisify(execFile);
const SECRETS: Record<string, string> = {
  "standard-webhooks": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  stripe: "whsec_stripe-style-secret-used-as-utf8",
  github: "github-secret-0123456789",
  shopify: "shopify-secret-0123456789",
  slack: "slack-secret-0123456789",
  "hmac-sha256": "hmac-secret-0123456789",
  none: "",
};

let app: TestApp;
let op: ConsoleClient;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  op = await signInConsole(app);
});
afterAll(async () => {
  await app?.close();
});

const unescape = (text: string) => text.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, "&");

describe("the curl example of each auth scheme", () => {
  it.each(Object.keys(SECRETS))("%s: the copied example is accepted", async (scheme) => {
    const name = `curl-${scheme}`;
    const auth: Record<string, unknown> = { scheme, ...(scheme === "none" ? {} : { secrets: [SECRETS[scheme]] }) };
    if (scheme === "hmac-sha256") auth.header = "X-Signature";
    if (["github", "shopify", "hmac-sha256"].includes(scheme)) auth.replay_across_runs = true;
    const declared = await app.api(`/signal-types/${name}`, {
      method: "PUT",
      json: { auth, schema: { type: "object", required: ["paid", "amount"], properties: { paid: { type: "boolean" }, amount: { type: "integer", minimum: 5 } } }, buffer_ttl_s: 60 },
    });
    expect(declared.status).toBe(201);

    const page = await (await op.get(`/console/signal-types/${name}`)).text();
    const example = unescape(/<pre class="copy" data-copy[^>]*>([\s\S]*?)<\/pre>/.exec(page)![1]!);
    expect(example).not.toContain(SECRETS[scheme] || "never-empty");
    const script = example.replaceAll("RUN_ID", `run-${scheme}`).replace(/^SECRET='…'.*$/m, "");
    const { stdout } = await run("bash", ["-c", `set -euo pipefail\n${script} --silent --show-error`], { env: { ...process.env, SECRET: SECRETS[scheme] } });
    expect(JSON.parse(stdout)).toMatchObject({ outcome: "buffered" });
    const stored = (await (await app.api(`/runs/run-${scheme}/signals`)).json()) as { items: Array<{ payload: unknown }> };
    expect(stored.items[0]!.payload).toEqual({ paid: true, amount: 5 });
  });
});
