import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { declareType, openWait } from "../helpers/http.ts";
import { settledWait } from "../helpers/race-gates.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// A timed wait's timeout job is not due when the wait opens, so it is queued without
// graphile-worker's NOTIFY "jobs:insert" (db/functions/add_job.sql): that NOTIFY would set every
// worker looking for a job none can find. The workers' polling still finds it once it is due.

let app: TestApp;
let listener: postgres.Sql;
const heard: string[] = [];

beforeAll(async () => {
  app = await startTestApp();
  listener = postgres(app.databaseUrl, { max: 1, onnotice: () => {} });
  await listener.listen("jobs:insert", (payload) => heard.push(payload));
  await declareType(app, "approval", { auth: { scheme: "none" } });
});
afterAll(async () => {
  await listener?.end({ timeout: 5 });
  await app?.close();
});

describe("a timed wait's timeout job", () => {
  it("is queued for the wait's deadline without waking the workers, and fires by polling", async () => {
    heard.length = 0;
    const { status, body: wait } = await openWait(app, "timed-1", { signal: "approval", timeout_s: 1 });
    expect(status).toBe(201);
    const [job] = await app.database.sql<{ run_at: string; task_identifier: string }[]>`
      select run_at::text, task_identifier from graphile_worker.jobs where key = ${`expire:${wait.id}`}`;
    expect(job?.task_identifier).toBe("expire_wait");
    expect(new Date(job!.run_at).toISOString()).toBe(wait.timeout_at);

    // NOTIFYs arrive in commit order: one the opening transaction sent comes before this probe.
    await listener.notify("jobs:insert", "probe");
    await waitFor("the probe", () => heard.includes("probe"));
    expect(heard).toEqual(["probe"]);

    expect((await settledWait(app, wait.id, 5)).status).toBe("timed_out");
  });
});
