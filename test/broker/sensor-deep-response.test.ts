import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH } from "../../src/signals/send-signal.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { openWait } from "../helpers/http.ts";
import { drainJobs } from "../helpers/race-gates.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// A sensor answer that meets the condition but nests thousands of levels deep: parsed, it
// overflows the stack wherever it is walked again (stored with JSON.stringify, read back with
// a reviver). Intake refuses such payloads; a sensor must not let one in either.

/** `{"ready":true,"detail":[[…]]}` nesting `depth` levels in all (the outer object is one). */
const deep = (depth: number) => `{"ready":true,"detail":${"[".repeat(depth - 1)}${"]".repeat(depth - 1)}}`;

let app: TestApp;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;
let target: Server;
let base = "";
beforeAll(async () => {
  app = await startTestApp({ env: { SIGNALBOX_SENSOR_TIMEOUT_MS: "2000" } });
  engine = await startCallbackReceiver();
  target = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(deep(Number(req.url!.slice(1))));
  });
  await new Promise<void>((r) => target.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
});
afterAll(async () => {
  target?.closeAllConnections();
  target?.close();
  await engine?.close();
  await app?.close();
});

const getWait = async (id: string) => {
  const res = await app.api(`/waits/${id}`);
  return { status: res.status, body: (await res.json()) as any };
};

describe("a sensor answering with deeply nested JSON", () => {
  it("is a miss (never a crash) past the intake's depth limit; max_polls times the wait out and it stays readable", async () => {
    const sensor = (depth: number) => ({ signal: `d${depth}`, callback_url: engine.url, sensor: { url: `${base}/${depth}`, pointer: "/ready", equals: true, interval_s: 1, max_polls: 2 } });
    const ids = [(await openWait(app, "deep-1", sensor(3000), 201)).body.id as string, (await openWait(app, "deep-1", sensor(6000), 201)).body.id as string];

    const waits = await waitFor("both sensors to run out of polls", async () => {
      await advanceClock(app, 1);
      return Promise.all(ids.map(getWait));
    }, { until: (ws) => ws.every((w) => w.status !== 200 || w.body.status !== "waiting"), timeoutMs: 15_000 });
    for (const w of waits) {
      expect(w.status).toBe(200);
      expect(w.body.status).toBe("timed_out");
    }

    const timeouts = ((await (await app.api("/runs/deep-1/events?limit=500")).json()) as any).items.filter((e: any) => e.type === "signal.timeout");
    expect(timeouts.map((e: any) => e.data)).toEqual(ids.map(() => ({ reason: "sensor missed 2 polls", last: `the response nests deeper than ${MAX_JSON_DEPTH} levels` })));

    const callbacks = await engine.waitFor(2);
    expect(callbacks.map((c) => [c.json.wait.id, c.json.type]).sort()).toEqual(ids.map((id) => [id, "signal.timeout"]).sort());
    await drainJobs(app);
    const failed = await app.database.sql`select task_identifier, last_error from graphile_worker.jobs where last_error is not null`;
    expect(failed).toEqual([]);
  });

  it(`takes an answer nesting exactly ${MAX_JSON_DEPTH} levels as before`, async () => {
    const { body } = await openWait(app, "deep-2", { signal: "edge", sensor: { url: `${base}/${MAX_JSON_DEPTH}`, pointer: "/ready", equals: true, interval_s: 1, max_polls: 1 } }, 201);
    const wait = await waitFor("the sensor to receive the wait", async () => {
      await advanceClock(app, 1);
      return getWait(body.id);
    }, { until: (w) => w.body.status !== "waiting" });
    expect(wait.status).toBe(200);
    expect(wait.body.status).toBe("received");
    expect(JSON.stringify(wait.body.result.payload)).toBe(deep(MAX_JSON_DEPTH));
  });
});
