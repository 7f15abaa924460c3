import postgres from "postgres";
import { afterAll, expect, it } from "vitest";
import { serviceOnOwnPostgres } from "../helpers/own-postgres-service.ts";
import { waitFor } from "../helpers/wait-for.ts";

// A failover of an HA Postgres with synchronous replication: a backend terminated while its
// commit waits for the standby has committed locally. A batch of the intake batcher
// (src/signals/intake-batcher.ts) cut off there must not be sent again signal by signal: each
// signal is recorded at most once; its sender may get a 503 (the outcome is unknown to us; it
// retries with its idempotency key) but never a second recording. Postgres says only a WARNING
// there (57P01, "committed locally") and then nothing (syncrep.c), so the batch fails as a closed
// connection, with no SQLSTATE, and is not sent again.

const own = serviceOnOwnPostgres("batch-fatal");
let holder: postgres.Sql | undefined;
afterAll(async () => {
  await holder?.end({ timeout: 1 });
});

const SIGNALS = 20;
const SLOTS = 4; // half the default pool of 8
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it("a batch of signals cut off while its commit waits for a standby is recorded once per signal", async () => {
  const { pg, svc } = own;
  expect((await svc.api("/signal-types/late", { method: "PUT", json: { auth: { scheme: "none" }, buffer_ttl_s: 3600 } })).status).toBe(201);
  const runs = Array.from({ length: SIGNALS }, (_, i) => `sync-${i}`);
  const blockers = Array.from({ length: SLOTS }, (_, i) => `block-${i}`);
  for (const run of [...runs, ...blockers]) expect((await svc.api(`/runs/${run}/waits`, { method: "POST", json: { signal: "late" } })).status).toBe(201);

  const backends = async (where: "SyncRep" | "Lock") =>
    (await pg.admin<Array<{ n: number }>>`
      select count(*)::int as n from pg_stat_activity
      where application_name = 'signalbox' and ${where === "SyncRep" ? pg.admin`wait_event = 'SyncRep'` : pg.admin`wait_event_type = 'Lock'`}`)[0]!.n;
  // Intake statements at work: those waiting for the standby (committed locally) and the rest.
  // Any other commit (a job runner's, say) waits for the standby too, so only intake's count.
  const intake = async () =>
    (await pg.admin<Array<{ waiting: number; busy: number }>>`
      select count(*) filter (where wait_event = 'SyncRep')::int as waiting, count(*) filter (where wait_event is distinct from 'SyncRep')::int as busy
      from pg_stat_activity
      where application_name = 'signalbox' and state = 'active' and query like '%accept_signals%'`)[0]!;
  const send = async (run: string) => {
    const res = await fetch(`${svc.baseUrl}/signals/${run}/late`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ run }), signal: AbortSignal.timeout(20_000) });
    return { run, status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  // The blockers' run locks are held: a signal for each fills one of the batcher's slots.
  holder = postgres(pg.url, { max: 1, onnotice: () => {}, connection: { application_name: "fault-test-holder" } });
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const held = holder
    .begin(async (tx) => {
      await tx`select 1 from signalbox.runs where run_id like 'block-%' for update`;
      locked();
      await released;
      throw new Error("roll back"); // a rollback does not wait for the standby
    })
    .catch(() => {});
  await isLocked;

  await pg.admin`alter system set synchronous_standby_names = 'ghost'`; // no such standby: every commit waits for it
  await pg.admin`select pg_reload_conf()`;
  let answers: Array<Awaited<ReturnType<typeof send>>>;
  let figures: Record<string, unknown> = {};
  try {
    const blocked: Array<Promise<Awaited<ReturnType<typeof send>>>> = [];
    for (const [k, run] of blockers.entries()) {
      blocked.push(send(run));
      await waitFor(`${k + 1} signals waiting for a run lock`, () => backends("Lock"), { until: (n) => n >= k + 1 });
    }
    const queued = runs.map(send); // all slots busy: these queue at the batcher
    await sleep(500);
    // The blocked singles' backends end: nothing of theirs committed; the queue goes as one batch.
    await pg.admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'signalbox' and wait_event_type = 'Lock'`;
    await waitFor("the queued signals' batch waiting for the standby, and no intake still at work", intake, { until: (n) => n.waiting >= 1 && n.busy === 0 });
    await sleep(200);
    const committedLocally = await pg.admin<Array<{ n: number }>>`select count(*)::int as n from signalbox.signals where run_id like 'sync-%'`;
    // The failover: the primary's backends end (the one waiting for the standby has committed locally).
    await pg.admin`select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'signalbox'`;
    await sleep(1000); // what signalbox sends again now waits for the standby too
    const resentWaiting = await backends("SyncRep");
    await pg.admin`alter system reset synchronous_standby_names`;
    await pg.admin`select pg_reload_conf()`;
    answers = await Promise.all([...queued, ...blocked]);
    figures = { committedLocallyBeforeCut: committedLocally[0]!.n, resentWaiting, statuses: answers.map((a) => a.status) };
  } finally {
    release();
    await held;
    await pg.admin`alter system reset synchronous_standby_names`;
    await pg.admin`select pg_reload_conf()`;
  }

  const logs = await Promise.all(
    [...runs, ...blockers].map(async (run) => ((await (await svc.api(`/runs/${run}/signals`)).json()) as { items: Array<{ outcome: string }> }).items.map((s) => s.outcome)),
  );
  const recordedTwice = answers.map((a, i) => ({ run: a.run, recorded: logs[i]!, answer: a.body.outcome ?? a.status })).filter((r) => r.recorded.length > 1);
  console.log(JSON.stringify({ ...figures, recordings: logs.map((l) => l.length) }));
  expect(answers.map((a) => a.status).filter((s) => s !== 202 && s !== 503)).toEqual([]);
  expect(recordedTwice).toEqual([]);
  // The scenario happened: the batch of all twenty had committed locally when it was cut off;
  // the blocked singles, cut off before their commit, left nothing.
  expect(logs.map((l) => l.length)).toEqual([...runs.map(() => 1), ...blockers.map(() => 0)]);
}, 60_000);
