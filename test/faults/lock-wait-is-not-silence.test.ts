import postgres from "postgres";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";

// The silence guard (src/db/silent-connections.ts) destroys a pool connection that has not
// answered for a while. A statement waiting seconds on a run's lock is not a silent connection:
// the lock may be held by a big cancel, an operator's transaction or a migration. Intake is one
// autocommit statement (signalbox.accept_signals, with its Sync already sent): were the socket
// destroyed under it, Postgres would still run it once the lock is free, and commit, while the
// sender, told 503, sends again (no Idempotency-Key): the signal accepted twice (3 s did so).

let app: TestApp;
let admin: postgres.Sql;
beforeAll(async () => {
  app = await startTestApp();
  admin = postgres(app.databaseUrl, { max: 2, onnotice: () => {} });
  expect((await app.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" }, buffer_ttl_s: 3600 } })).status).toBe(201);
});
afterAll(async () => {
  await admin?.end();
  await app?.close();
});

it("a signal whose run's lock is held for 4 s is answered 202, or not accepted if answered 503", async () => {
  expect((await app.api("/runs/locked-run/waits", { method: "POST", json: { signal: "approval" } })).status).toBe(201);

  let locked!: () => void;
  const lockTaken = new Promise<void>((r) => (locked = r));
  const holder = admin.begin(async (tx) => {
    await tx`select 1 from signalbox.runs where run_id = 'locked-run' for update`;
    locked();
    await new Promise((r) => setTimeout(r, 4_000));
  });
  await lockTaken;
  const started = performance.now();
  const first = await app.api("/signals/locked-run/approval", { method: "POST", json: { approved: true } });
  const ms = Math.round(performance.now() - started);
  await holder;
  await new Promise((r) => setTimeout(r, 500));
  const recorded = await admin<Array<{ outcome: string }>>`select outcome from signalbox.signals where run_id = 'locked-run' order by sequence`;

  // What a sender does with a 503 (Retry-After): it sends again.
  let retry: number | undefined;
  if (first.status === 503) retry = (await app.api("/signals/locked-run/approval", { method: "POST", json: { approved: true } })).status;
  const after = await admin<Array<{ outcome: string }>>`select outcome from signalbox.signals where run_id = 'locked-run' order by sequence`;

  expect({ status: first.status, ms, recordedAfterFirst: recorded.map((r) => r.outcome), retry, recordedAfterRetry: after.map((r) => r.outcome) }).toEqual({
    status: 202,
    ms: expect.any(Number),
    recordedAfterFirst: ["received"],
    retry: undefined,
    recordedAfterRetry: ["received"],
  });
}, 30_000);
