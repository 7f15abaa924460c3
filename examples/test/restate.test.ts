import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient } from "../../packages/client/src/index.ts";
import type { ServiceProcess } from "../../test/helpers/service-process.ts";
import { API_KEY, EXAMPLES, freePort, NODE, startExample, startSignalbox, waitFor, type ExampleProcess } from "./helpers.ts";

// examples/restate: a Restate workflow suspends on a durable promise that signalbox's callback
// resolves. restate-server calls out to a host of its own at start-up whatever its settings, so
// this runs only where the network has nothing but loopback: `npm run examples` starts the tests
// inside such a namespace (unshare -n) when it may.
const interfaces = Object.keys(os.networkInterfaces());
const isolated = interfaces.every((name) => name === "lo");
if (!isolated) {
  console.warn(`examples/restate skipped: this network has ${interfaces.join(", ")}, and restate-server must not reach past loopback; run it through \`npm run examples\` as root (it uses unshare -n)`);
}

describe.skipIf(!isolated)("Restate example", () => {
  let svc: ServiceProcess;
  let signalbox: ReturnType<typeof createClient>;
  let ingress: string;
  let env: Record<string, string>;
  let example: ExampleProcess;
  let restateOutput = "";
  let dataDir: string | undefined;
  let server: ChildProcess | undefined;

  afterAll(async () => {
    if (server && server.exitCode === null && server.signalCode === null) {
      const closed = new Promise((resolve) => server!.once("close", resolve));
      server.kill("SIGTERM"); // the npm wrapper passes it on to the binary, which shuts down cleanly
      await closed;
    }
    if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
  });

  const start = async () => {
    example = startExample("restate", "src/main.ts", svc, env);
    await example.printed("listening on");
  };
  const output = (key: string) => fetch(`${ingress}/restate/workflow/refund/${key}/output`);

  beforeAll(async () => {
    svc = await startSignalbox();
    signalbox = createClient({ baseUrl: svc.baseUrl, token: API_KEY });
    const [ingressPort, adminPort, nodePort, servicePort, callbackPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
    ingress = `http://127.0.0.1:${ingressPort}`;
    const admin = `http://127.0.0.1:${adminPort}`;

    // restate-server from its npm package, its data in a directory of its own, on loopback only.
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "restate-example-"));
    server = spawn(NODE, [path.join(EXAMPLES, "restate/node_modules/@restatedev/restate-server/lib/index.js"), "--no-logo", "--listen-mode", "tcp", "--base-dir", dataDir], {
      stdio: ["ignore", "pipe", "pipe"],
      env: {
        PATH: process.env.PATH,
        RESTATE_DISABLE_TELEMETRY: "true",
        RESTATE_LOG_FORMAT: "compact",
        RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingressPort}`,
        RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${adminPort}`,
        RESTATE_BIND_ADDRESS: `127.0.0.1:${nodePort}`,
      },
    });
    server.stdout!.on("data", (d: Buffer) => (restateOutput += d.toString("utf8")));
    server.stderr!.on("data", (d: Buffer) => (restateOutput += d.toString("utf8")));
    await waitFor("restate-server's ingress to answer", () => fetch(`${ingress}/restate/health`).then((r) => r.ok, () => false), {
      timeoutMs: 60_000,
      gaveUp: () => (server!.exitCode !== null ? "restate-server exited" : undefined),
      context: () => restateOutput,
    });

    env = { PORT: String(callbackPort), SERVICE_PORT: String(servicePort), RESTATE_INGRESS_URL: ingress };
    await start();
    // Tell Restate where the service is (what `restate deployments register` does).
    const registered = await fetch(`${admin}/deployments`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ uri: `http://127.0.0.1:${servicePort}` }),
    });
    expect(registered.status, await registered.text()).toBeLessThan(300);
  });

  it("resolves the workflow's durable promise from the callback, also after the service restarted while it waited", async () => {
    const started = await fetch(`${ingress}/refund/r-9/run/send`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ customer: "c-3", amount: 75 }),
    });
    expect(started.status, await started.text()).toBe(202);
    await waitFor("the workflow's wait to open", () => signalbox.waits.find({ signal: "refund-approval", status: "waiting", metadata: { restate_key: "r-9" } }), {
      until: (page) => page.items.length === 1,
      timeoutMs: 30_000,
      context: () => `${example.output()}\n${restateOutput.slice(-3000)}`,
    });

    // The workflow is suspended in Restate; the service process may come and go meanwhile.
    example.child.kill("SIGKILL");
    await example.exited;
    await start();

    const payload = { approved: true, approver: "kim" };
    expect((await signalbox.signals.send("refund-r-9", "refund-approval", payload)).outcome).toBe("received");
    const done = await waitFor("the workflow's output", () => output("r-9"), { until: (r) => r.status === 200, timeoutMs: 30_000, context: example.output });
    expect(await done.json()).toEqual({ refund: "r-9", status: "refunded", decision: payload });
  });

  it("forwards a repeated callback with the same idempotency key, which Restate answers without a second resolve", async () => {
    const [wait] = (await signalbox.waits.ofRun("refund-r-9")).items;
    await signalbox.waits.redeliver(wait!.id);
    const attempts = await waitFor("the redelivery to be answered", () => signalbox.waits.deliveries(wait!.id), {
      until: (d) => d.items.length === 2 && d.items.every((a) => a.status_code !== null),
      context: example.output,
    });
    expect(attempts.items.map((a) => a.status_code)).toEqual([204, 204]);
    expect(await (await output("r-9")).json()).toMatchObject({ status: "refunded" });
  });
});
