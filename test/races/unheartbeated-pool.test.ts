import postgres from "postgres";
import { afterAll, expect, it } from "vitest";
import { declareType, openWait } from "../helpers/http.ts";
import { killServices, onDatabase, spawnService } from "../helpers/service-process.ts";
import { createTestDatabase, startTestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Two replicas on one database. One dies (SIGKILL) after its runner took a job but before the
// pool's first heartbeat row was written (here: the heartbeat is held up by a lock; in life: a
// kill in the first milliseconds, or a first heartbeat that failed). README: another process runs
// its jobs again within about 11 s.
let db: Awaited<ReturnType<typeof createTestDatabase>>;
let admin: postgres.Sql;
afterAll(async () => {
  killServices();
  await admin?.end();
  await db?.drop();
});

it("a replica killed before its first heartbeat strands no job", async () => {
  db = await createTestDatabase();
  admin = postgres(db.url, { max: 2, onnotice: () => {} });
  const setup = await startTestApp({ databaseUrl: db.url, worker: false });
  await declareType(setup, "approval");
  const wait = (await openWait(setup, "stranded", { signal: "approval", timeout_s: 1 }, 201)).body as { id: string };
  await setup.close();

  // Hold the run (its timeout job, once taken, waits for it) and the heartbeat table.
  const held = admin.reserve();
  const tx = await held;
  await tx`begin`;
  await tx`select 1 from signalbox.runs where run_id = 'stranded' for update`;
  await tx`lock table signalbox.worker_pools in access exclusive mode`;
  await new Promise((r) => setTimeout(r, 1200)); // the timeout is due

  const doomed = await spawnService(onDatabase(db.url, { LOG_LEVEL: "warn" }));
  const job = () => admin<{ locked_by: string | null }[]>`select locked_by from graphile_worker.jobs where key = ${`expire:${wait.id}`}`.then((r) => r[0]);
  const taken = await waitFor("its timeout job taken by the new replica", job, { until: (j) => typeof j?.locked_by === "string", timeoutMs: 30_000 });
  doomed.child.kill("SIGKILL");
  await doomed.exited;
  await tx`rollback`;
  tx.release();

  const survivor = await spawnService(onDatabase(db.url, { LOG_LEVEL: "info" })); // stale after 1 s, swept every 0.25 s
  await survivor.listening;
  try {
    const status = () => admin<{ status: string }[]>`select status from signalbox.waits where id = ${wait.id}`.then((r) => r[0]!.status);
    expect(taken!.locked_by).toBeTruthy();
    await waitFor("the wait timed out by the survivor", status, {
      until: (s) => s === "timed_out",
      timeoutMs: 20_000,
      context: async () => `job now: ${JSON.stringify(await job())}`,
    });
  } finally {
    survivor.child.kill("SIGTERM");
    await survivor.exited;
  }
}, 90_000);
