import fs from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver } from "../../../test/helpers/callback-receiver.ts";
import { API_KEY, startTestApp, type TestApp } from "../../../test/helpers/test-app.ts";
import { waitFor } from "../../../test/helpers/wait-for.ts";
import { createClient, type SignalboxClient, type Wait } from "../src/index.ts";
import { collect, outputLine, runCli, spawnCli } from "./helpers/run-cli.ts";

let app: TestApp;
let client: SignalboxClient;
let env: Record<string, string>;
let dir: string;

beforeAll(async () => {
  // One attempt per delivery, so a failed callback is failed at once (deliveries ls --failed).
  app = await startTestApp({ env: { SIGNALBOX_DELIVERY_MAX_ATTEMPTS: "1" } });
  client = createClient({ baseUrl: app.baseUrl, token: API_KEY });
  env = { SIGNALBOX_URL: app.baseUrl, SIGNALBOX_TOKEN: API_KEY };
  dir = await fs.mkdtemp(path.join(os.tmpdir(), "sbx-cli-"));
});

afterAll(async () => {
  await app?.close();
  await fs.rm(dir, { recursive: true, force: true });
});

const cli = (args: string[], stdin?: string) => runCli(args, { env, ...(stdin !== undefined ? { stdin } : {}) });

describe("signalbox types apply", () => {
  it("creates, then replaces, each type of the file; secrets come from the variables the file names", async () => {
    const file = path.join(dir, "types.json");
    await fs.writeFile(
      file,
      JSON.stringify({
        approval: { schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" } } }, auth: { scheme: "none" } },
        payment: { auth: { scheme: "standard-webhooks", secrets: ["env:PAYMENT_SECRET"] }, buffer_ttl_s: 3600 },
      }),
    );
    const secretEnv = { ...env, PAYMENT_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" };
    const first = await runCli(["types", "apply", file], { env: secretEnv });
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^NAME +RESULT +DETAIL\napproval +created\npayment +created\n$/);
    const again = await runCli(["types", "apply", file, "--json"], { env: secretEnv });
    expect(JSON.parse(again.stdout)).toEqual([
      { name: "approval", result: "replaced" },
      { name: "payment", result: "replaced" },
    ]);
    expect((await client.signalTypes.get("payment")).auth).toMatchObject({ scheme: "standard-webhooks", secret_count: 1 });

    expect(await runCli(["types", "apply", file], { env })).toMatchObject({ code: 2, stderr: expect.stringContaining("PAYMENT_SECRET is not set") });
    expect(await cli(["types", "apply", path.join(dir, "missing.json")])).toMatchObject({ code: 2, stderr: expect.stringContaining("cannot read") });
  });

  it("applies every entry, reports the one the server refused, and exits 1", async () => {
    const file = path.join(dir, "bad-types.json");
    await fs.writeFile(file, JSON.stringify({ "bad-schema": { schema: { type: "no-such-type" }, auth: { scheme: "none" } }, fine: { auth: { scheme: "none" } } }));
    const res = await cli(["types", "apply", file]);
    expect(res.code).toBe(1);
    expect(res.stdout).toMatch(/bad-schema +failed +422: /);
    expect(res.stdout).toMatch(/fine +created/);
  });

  /** A signalbox that applies the first type, then answers the next with `then` (null: it has gone away). */
  async function goesAwayAfterOneType(then: { status: number; retryAfter?: string } | null) {
    let puts = 0;
    const server = createServer((req, res) => {
      puts++;
      req.resume();
      if (puts === 1 || !then) {
        res.writeHead(201, { "content-type": "application/json", connection: "close" });
        res.end(JSON.stringify({ name: req.url!.split("/").pop() }));
        if (!then) server.close(); // the next connection is refused
        return;
      }
      res.writeHead(then.status, { "content-type": "application/problem+json", connection: "close" });
      res.end(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: then.status, detail: "database unavailable" }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
  }

  it("stopped part way (signalbox gone, or 503), says which types it applied and which it did not, and exits 3", async () => {
    const file = path.join(dir, "three-types.json");
    await fs.writeFile(file, JSON.stringify({ first: { auth: { scheme: "none" } }, second: { auth: { scheme: "none" } }, third: { auth: { scheme: "none" } } }));

    const gone = await goesAwayAfterOneType(null);
    const refused = await runCli(["types", "apply", file], { env: { SIGNALBOX_URL: gone.url, SIGNALBOX_TOKEN: API_KEY } });
    expect(refused.code).toBe(3);
    expect(refused.stdout).toMatch(/^NAME +RESULT +DETAIL\nfirst +created\nsecond +not_applied +no answer: ECONNREFUSED\nthird +not_applied\n$/);
    expect(refused.stderr).toMatch(/^error: signalbox unreachable at .*: ECONNREFUSED\n {2}applied: first; not applied: second, third\n {2}\(.*again is safe\)\n$/);

    const busy = await goesAwayAfterOneType({ status: 503 });
    const unavailable = await runCli(["types", "apply", file, "--json"], { env: { SIGNALBOX_URL: busy.url, SIGNALBOX_TOKEN: API_KEY } });
    busy.close();
    expect(unavailable.code).toBe(3);
    expect(JSON.parse(unavailable.stdout)).toEqual([
      { name: "first", result: "created" },
      { name: "second", result: "not_applied", status: 503, detail: "503: database unavailable" },
      { name: "third", result: "not_applied" },
    ]);
    expect(unavailable.stderr).toContain("applied: first; not applied: second, third");
  });
});

describe("signalbox waits", () => {
  let kim: Wait;
  let lee: Wait;

  beforeAll(async () => {
    await client.signalTypes.put("review", { auth: { scheme: "none" } });
    kim = await client.waits.open("doc-1", { signal: "review", timeout_s: 600, metadata: { assignee: "kim" } });
    lee = await client.waits.open("doc-2", { signal: "review", timeout_s: 7200, metadata: { assignee: "lee" } });
  });

  it("ls shows a table of the pending waits, filtered by signal, metadata and deadline", async () => {
    const all = await cli(["waits", "ls", "--signal", "review"]);
    expect(all.code).toBe(0);
    const [heading, ...rows] = all.stdout.trimEnd().split("\n");
    expect(heading).toMatch(/^ID +RUN +SIGNAL +STATUS +CREATED +DEADLINE +DELIVERY +METADATA$/);
    expect(rows.map((r) => r.split(/ +/)[0])).toEqual([kim.id, lee.id]);
    expect(rows[0]).toMatch(new RegExp(`^${kim.id} +doc-1 +review +waiting +.*\\(in (9m( \\d+s)?|10m)\\) +none +\\{"assignee":"kim"\\}$`));

    const kims = JSON.parse((await cli(["waits", "ls", "--signal", "review", "--metadata", "assignee=kim", "--json"])).stdout) as Wait[];
    expect(kims.map((w) => w.id)).toEqual([kim.id]);
    const dueSoon = JSON.parse((await cli(["waits", "ls", "--signal", "review", "--due-before", "1h", "--json"])).stdout) as Wait[];
    expect(dueSoon.map((w) => w.id)).toEqual([kim.id]);
    const ofRun = JSON.parse((await cli(["waits", "ls", "--run", "doc-2", "--json"])).stdout) as Wait[];
    expect(ofRun.map((w) => w.id)).toEqual([lee.id]);
  });

  it("ls pages: --limit says there is more, --all reads every page", async () => {
    const one = await cli(["waits", "ls", "--signal", "review", "--limit", "1", "--json"]);
    expect(JSON.parse(one.stdout)).toHaveLength(1);
    expect(one.stderr).toContain("more waits match");
    expect(JSON.parse((await cli(["waits", "ls", "--signal", "review", "--all", "--json"])).stdout)).toHaveLength(2);
  });

  it("show prints one wait in full, or exits 1 for an unknown id", async () => {
    const shown = await cli(["waits", "show", kim.id]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^id +wt_/);
    expect(shown.stdout).toMatch(/\nstatus +waiting\n/);
    expect(shown.stdout).toMatch(/\nmetadata +\{"assignee":"kim"\}\n/);
    expect(JSON.parse((await cli(["waits", "show", kim.id, "--json"])).stdout)).toEqual(await client.waits.get(kim.id));
    const unknown = await cli(["waits", "show", "wt_nope"]);
    expect(unknown).toMatchObject({ code: 1, stderr: expect.stringMatching(/^error: 404 /) });
  });
});

describe("signalbox send", () => {
  beforeAll(async () => {
    await client.signalTypes.put("approve", { schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" } } }, auth: { scheme: "none" } });
  });

  it("sends JSON from the flag, a file or stdin, and exits 0 with the outcome", async () => {
    const wait = await client.waits.open("order-1", { signal: "approve" });
    const res = await cli(["send", "order-1", "approve", "--data", '{"approved": true}']);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(new RegExp(`^outcome +received\nsignal +sg_\\S+\nsequence +1\nwait +${wait.id}\nidempotency key +\\S+\n$`));

    await client.waits.open("order-2", { signal: "approve" });
    const file = path.join(dir, "payload.json");
    await fs.writeFile(file, '{"approved": false}');
    expect(JSON.parse((await cli(["send", "order-2", "approve", "--data", `@${file}`, "--json"])).stdout)).toMatchObject({ outcome: "received", sequence: 1 });
    await client.waits.open("order-3", { signal: "approve" });
    expect(JSON.parse((await cli(["send", "order-3", "approve", "-d", "@-", "--json"], '{"approved": true}')).stdout)).toMatchObject({ outcome: "received" });
    expect((await client.signals.ofRun("order-3")).items[0]?.payload).toEqual({ approved: true });
  });

  it("--wait prints the callback's reply; a bad --wait is a usage error", async () => {
    const engine = await startCallbackReceiver(() => ({ status: 200, headers: { "content-type": "application/json" }, body: '{"next":"ship"}' }));
    try {
      await client.waits.open("order-wait", { signal: "approve", callback_url: engine.url });
      const res = await cli(["send", "order-wait", "approve", "--data", '{"approved": true}', "--wait", "10"]);
      expect(res.code, res.stderr).toBe(0);
      expect(res.stdout).toMatch(/\nreply +\{"next":"ship"\}\n$/);
      const bad = await cli(["send", "order-wait", "approve", "--wait", "0"]);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/--wait must be/);
    } finally {
      await engine.close();
    }
  });

  it("the same --idempotency-key again is a duplicate, exit 0", async () => {
    await client.waits.open("order-4", { signal: "approve" });
    const args = ["send", "order-4", "approve", "--data", '{"approved": true}', "--idempotency-key", "approve-4", "--json"];
    const first = JSON.parse((await cli(args)).stdout);
    const second = await cli(args);
    expect(second.code).toBe(0);
    expect(JSON.parse(second.stdout)).toMatchObject({ outcome: "duplicate", signal_id: first.signal_id, idempotency_key: "approve-4" });
  });

  it("a refused signal exits 1 with the outcome and where the payload is wrong; --json prints the problem", async () => {
    await client.waits.open("order-5", { signal: "approve" });
    const invalid = await cli(["send", "order-5", "approve", "--data", '{"approved": "yes"}']);
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/^error: 422 .*\n  outcome: rejected_invalid_payload\n  \/approved: /);
    const notWaiting = await cli(["send", "order-nobody", "approve", "--data", '{"approved": true}', "--json"]);
    expect(notWaiting.code).toBe(1);
    expect(JSON.parse(notWaiting.stdout)).toMatchObject({ status: 409, outcome: "rejected_not_waiting" });
  });
});

describe("signalbox tail", () => {
  it("prints the run's history, then each new event as it happens, until Ctrl-C", async () => {
    await client.signalTypes.put("ship", { auth: { scheme: "none" } });
    const wait = await client.waits.open("parcel-1", { signal: "ship" });
    const child = spawnCli(["tail", "parcel-1"], env);
    const out = collect(child);
    const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
    await outputLine(child, out, /signal\.waiting +wait wt_/, "the history's signal.waiting line");
    await client.signals.send("parcel-1", "ship", { carrier: "ups" });
    await outputLine(child, out, /signal\.received/, "the live signal.received line");
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    const lines = out.stdout().trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(new RegExp(`^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ  ev_\\S+ +signal\\.waiting +wait ${wait.id}`));
    expect(lines[1]).toMatch(new RegExp(`signal\\.received +wait ${wait.id} signal sg_`));
  });

  it("--json prints one event per line, and --after starts after an event", async () => {
    const history = (await client.runs.events("parcel-1")).items;
    const child = spawnCli(["tail", "parcel-1", "--json", "--after", history[0]!.id], env);
    const out = collect(child);
    const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
    await outputLine(child, out, /"signal\.received"/, "the signal.received event");
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(out.stdout().trimEnd().split("\n").map((l) => JSON.parse(l).id)).toEqual([history[1]!.id]);
  });
});

describe("signalbox deliveries ls and redeliver", () => {
  it("lists a failed callback, redelivers it, and it is delivered", async () => {
    let accept = false;
    const engine = await startCallbackReceiver(() => (accept ? 204 : 503));
    try {
      await client.signalTypes.put("done", { auth: { scheme: "none" } });
      const wait = await client.waits.open("job-1", { signal: "done", callback_url: engine.url });
      await client.signals.send("job-1", "done", {});
      await waitFor("the delivery to fail", () => client.waits.get(wait.id), { until: (w) => w.delivery.status === "failed" });

      const listed = await cli(["deliveries", "ls", "--failed"]);
      expect(listed.code).toBe(0);
      expect(listed.stdout).toMatch(new RegExp(`^WAIT +RUN +SIGNAL +STATUS +ATTEMPTS +LAST ATTEMPT +HOST +LAST ERROR\n${wait.id} +job-1 +done +failed +1 +.* +127\\.0\\.0\\.1:\\d+ +HTTP 503\n$`));
      expect(JSON.parse((await cli(["deliveries", "ls", "--pending", "--json"])).stdout)).toEqual([]);

      accept = true;
      const redelivered = await cli(["redeliver", wait.id]);
      expect(redelivered).toMatchObject({ code: 0, stdout: expect.stringContaining(`${wait.id}: callback to ${engine.url} queued`) });
      await waitFor("the redelivery", () => client.waits.get(wait.id), { until: (w) => w.delivery.status === "delivered" });
      expect((await cli(["deliveries", "ls", "--failed"])).stderr).toBe("no failing deliveries\n");

      const notYet = await client.waits.open("job-2", { signal: "done" });
      expect(await cli(["redeliver", notYet.id])).toMatchObject({ code: 1, stderr: expect.stringMatching(/^error: 409 /) });
    } finally {
      await engine.close();
    }
  });
});

describe("signalbox deliveries ls and redeliver --start (signal-with-start)", () => {
  it("lists a failed run.start as a start, redelivers it by run id, and it is delivered", async () => {
    let accept = false;
    const engine = await startCallbackReceiver(() => (accept ? 204 : 503));
    try {
      await client.signalTypes.put("order-placed", { auth: { scheme: "none" }, start: { url: engine.url } });
      expect(await client.signals.send("shop-1", "order-placed", { total: 3 })).toMatchObject({ outcome: "started", sequence: 1 });
      await waitFor("the start to fail", () => client.runs.start("shop-1"), { until: (s) => s.delivery.status === "failed" });

      const listed = await cli(["deliveries", "ls", "--failed"]);
      expect(listed.stderr).toBe("");
      expect(listed.stdout).toMatch(/\nstart +shop-1 +order-placed +failed +1 +.* +127\.0\.0\.1:\d+ +HTTP 503\n/);
      accept = true;
      const redelivered = await cli(["redeliver", "--start", "shop-1"]);
      expect(redelivered).toMatchObject({ code: 0, stdout: expect.stringMatching(/^shop-1: run\.start to 127\.0\.0\.1:\d+ queued \(delivery pending, 1 attempts so far\)\n$/) });
      await waitFor("the redelivery", () => client.runs.start("shop-1"), { until: (s) => s.delivery.status === "delivered" });
      expect((await client.runs.startDeliveries("shop-1")).items.map((a) => a.outcome)).toEqual(["failed", "delivered"]);
      expect(await cli(["redeliver", "--start", "no-such-run"])).toMatchObject({ code: 1, stderr: expect.stringMatching(/^error: 404 /) });
    } finally {
      await engine.close();
    }
  });
});

describe("signalbox redrive", () => {
  it("sends one dead letter again (the SDK's signals.redrive), then refuses it a second time; by filter it prints counts", async () => {
    await client.signalTypes.put("late-cli", { auth: { scheme: "none" } });
    const rejected = async (run: string) => {
      const res = await fetch(`${app.baseUrl}/signals/${run}/late-cli`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"n": 1}' });
      return ((await res.json()) as { signal_id: string }).signal_id;
    };
    const dead = await rejected("cli-rd-1");
    const wait = await client.waits.open("cli-rd-1", { signal: "late-cli" });

    const once = await cli(["redrive", dead]);
    expect(once.code, once.stderr).toBe(0);
    expect(once.stdout).toMatch(new RegExp(`^outcome +received\nsignal +sg_\\w+\nsequence +1\nwait +${wait.id}\nredriven from +${dead}\n$`));
    const again = await cli(["redrive", dead, "--json"]);
    expect(again.code).toBe(1);
    expect(JSON.parse(again.stdout)).toMatchObject({ status: 409, title: "already_redriven" });

    await rejected("cli-rd-2");
    await rejected("cli-rd-3");
    const bulk = await cli(["redrive", "--signal", "late-cli", "--json"]);
    expect(JSON.parse(bulk.stdout)).toEqual({ redriven: 2, outcomes: { rejected_not_waiting: 2 }, skipped: { payload_not_kept: 0, already_redriven: 0 }, more: false });
    expect(await client.signals.redriveMatching({ signal: "late-cli", outcome: "expired" })).toMatchObject({ redriven: 0 });

    expect(await cli(["redrive"])).toMatchObject({ code: 2, stderr: expect.stringContaining("give a signal id") });
    expect(await cli(["redrive", dead, "--run", "x"])).toMatchObject({ code: 2, stderr: expect.stringContaining("not both") });
    expect(await cli(["redrive", "--outcome", "received"])).toMatchObject({ code: 2, stderr: expect.stringContaining("--outcome must be one of") });
  });
});
