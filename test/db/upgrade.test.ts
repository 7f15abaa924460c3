import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { drizzle } from "drizzle-orm/postgres-js";
import { migrate } from "drizzle-orm/postgres-js/migrator";
import { runMigrations } from "graphile-worker";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MIGRATIONS_DIR, migrateDatabase } from "../../src/db/migrate.ts";
import { newId } from "../../src/core/ids.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { intake, openWait } from "../helpers/http.ts";
import { describeSchema } from "../helpers/schema-description.ts";
import { createTestDatabase, startTestApp } from "../helpers/test-app.ts";

/**
 * Every schema level main has had: migration-history/levels.json lists, per level (NN-<commit>),
 * the migration files db/migrations held at that commit, by name and digest, and journals/ its
 * journal. A file is the committed one when its digest matches (migrations are append-only),
 * else the superseded version kept in migration-history/files (0006 and 0008 were once edited).
 * A database built at each level, with work in flight, upgrades to HEAD, reaches the schema of a
 * fresh database and carries its old rows through the lifecycle.
 */
const HISTORY = path.join(path.dirname(fileURLToPath(import.meta.url)), "migration-history");
const LEVELS = JSON.parse(await fs.readFile(path.join(HISTORY, "levels.json"), "utf8")) as Record<string, string[]>;
const levels = Object.keys(LEVELS).sort();

/** db/migrations as it was at `level`, assembled in a temporary folder drizzle's migrator can read. */
async function migrationsAt(level: string): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), `signalbox-level-${level}-`));
  await fs.mkdir(path.join(dir, "meta"));
  await fs.copyFile(path.join(HISTORY, "journals", `${level}.json`), path.join(dir, "meta", "_journal.json"));
  for (const entry of LEVELS[level]!) {
    const [, name, digest] = /^(.+)\.([0-9a-f]{8})\.sql$/.exec(entry)!;
    const committed = await fs.readFile(path.join(MIGRATIONS_DIR, `${name}.sql`)).catch(() => null);
    const text = committed && createHash("sha256").update(committed).digest("hex").startsWith(digest!) ? committed : await fs.readFile(path.join(HISTORY, "files", entry));
    await fs.writeFile(path.join(dir, `${name}.sql`), text);
  }
  return dir;
}

/** How signalbox migrated at those commits: graphile-worker's schema, then drizzle's migrator. */
async function migrateAsAt(level: string, url: string) {
  await runMigrations({ connectionString: url });
  const client = postgres(url, { max: 1, onnotice: () => {} });
  const folder = await migrationsAt(level);
  try {
    await migrate(drizzle(client), { migrationsFolder: folder, migrationsSchema: "drizzle", migrationsTable: "signalbox_migrations" });
  } finally {
    await client.end();
    await fs.rm(folder, { recursive: true, force: true });
  }
}

interface Seeded {
  /** Open, due a moment after the upgrade: its timeout job fires then. */
  timingOut: string;
  /** Open until a signal comes after the upgrade. */
  awaitingSignal: string;
  /** Received before the upgrade, its callback still owed (a queued delivery job). */
  owedCallback: string;
}

/**
 * Work in flight, written with the columns every level has (0000_init's) and graphile-worker's
 * SQL API, as the service at that level left it: open waits with timeout jobs, a received wait
 * whose callback job is queued, and a buffered signal for a wait not yet opened.
 */
async function seed(sql: postgres.Sql, callbackUrl: string): Promise<Seeded> {
  const [timingOut, awaitingSignal, owedCallback] = [newId("wt"), newId("wt"), newId("wt")];
  const received = newId("sg");
  await sql.begin(async (tx) => {
    await tx`insert into signalbox.signal_types (name, auth, buffer_ttl_s) values ('approval', ${tx.json({ scheme: "none", secrets: [], tolerance_s: 300 })}, 3600)`;
    await tx`insert into signalbox.runs (run_id, last_sequence) values ('r-timeout', 0), ('r-signal', 0), ('r-owed', 1), ('r-buffered', 1)`;
    await tx`
      insert into signalbox.waits (id, run_id, signal, timeout_at, callback_url) values
        (${timingOut}, 'r-timeout', 'approval', now() + interval '1.5 seconds', ${callbackUrl}),
        (${awaitingSignal}, 'r-signal', 'approval', now() + interval '1 hour', ${callbackUrl})`;
    for (const id of [timingOut, awaitingSignal]) {
      await tx`select graphile_worker.add_job('expire_wait', json_build_object('id', ${id}::text), run_at := (select timeout_at from signalbox.waits where id = ${id}), max_attempts := 25, job_key := ${"expire:" + id})`;
    }
    await tx`insert into signalbox.signals (id, run_id, signal, sequence, outcome, payload, wait_id) values (${received}, 'r-owed', 'approval', 1, 'received', '{"approved":true}', ${owedCallback})`;
    const [event] = await tx<{ id: number }[]>`insert into signalbox.events (run_id, type, wait_id, signal_id) values ('r-owed', 'signal.received', ${owedCallback}, ${received}) returning id`;
    await tx`
      insert into signalbox.waits (id, run_id, signal, status, resolved_at, callback_url, signal_id, resolution_event_id, delivery_status)
      values (${owedCallback}, 'r-owed', 'approval', 'received', now(), ${callbackUrl}, ${received}, ${event!.id}, 'pending')`;
    await tx`select graphile_worker.add_job('deliver_callback', json_build_object('id', ${owedCallback}::text), max_attempts := 25, job_key := ${"deliver:" + owedCallback})`;
    await tx`
      insert into signalbox.signals (id, run_id, signal, sequence, outcome, payload, buffer_expires_at)
      values (${newId("sg")}, 'r-buffered', 'approval', 1, 'buffered', '{"approved":false}', now() + interval '1 hour')`;
  });
  return { timingOut, awaitingSignal, owedCallback };
}

let headSchema: string[];
beforeAll(async () => {
  const fresh = await createTestDatabase(); // the template: a fresh database migrated at HEAD
  const sql = postgres(fresh.url, { max: 1, onnotice: () => {} });
  headSchema = await describeSchema(sql);
  await sql.end();
  await fresh.drop();
});

describe.each(levels)("a database migrated at %s", (level) => {
  const cleanup: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const fn of cleanup.reverse()) await fn();
  });

  it("upgrades to HEAD's schema and finishes the work it had in flight", async () => {
    const db = await createTestDatabase({ empty: true });
    cleanup.push(db.drop);
    const receiver = await startCallbackReceiver();
    cleanup.push(receiver.close);
    await migrateAsAt(level, db.url);
    const sql = postgres(db.url, { max: 2, onnotice: () => {} });
    cleanup.push(() => sql.end());
    const seeded = await seed(sql, receiver.url);

    await migrateDatabase(db.url);
    expect(await describeSchema(sql)).toEqual(headSchema);

    const app = await startTestApp({ databaseUrl: db.url });
    cleanup.push(app.close);
    // The signal for the old open wait, a wait that takes the old buffered signal, and a new
    // plain wait (the one-statement path, signalbox.open_wait) with its signal.
    const signalled = await intake(app, "r-signal", "approval", '{"approved":true}');
    expect(signalled.body).toMatchObject({ outcome: "received", wait_id: seeded.awaitingSignal });
    const takesBuffered = await openWait(app, "r-buffered", { signal: "approval", timeout_s: 60, callback_url: receiver.url });
    expect(takesBuffered).toMatchObject({ status: 201, body: { status: "received" } });
    const fresh = await openWait(app, "r-new", { signal: "approval", timeout_s: 60, callback_url: receiver.url });
    expect(fresh).toMatchObject({ status: 201, body: { status: "waiting" } });
    expect((await intake(app, "r-new", "approval", '{"approved":true}')).body).toMatchObject({ outcome: "received", wait_id: fresh.body.id });

    const callbacks = await receiver.waitFor(5, 15_000);
    const byWait = new Map(callbacks.map((cb) => [cb.json.wait.id, cb.json.type]));
    expect(Object.fromEntries(byWait)).toEqual({
      [seeded.timingOut]: "signal.timeout",
      [seeded.awaitingSignal]: "signal.received",
      [seeded.owedCallback]: "signal.received",
      [takesBuffered.body.id]: "signal.received",
      [fresh.body.id]: "signal.received",
    });
    // Each wait left `waiting` once: one resolution event each, every callback delivered.
    const rows = await waitFor(
      "every callback recorded",
      () => sql<{ id: string; delivery_status: string; resolutions: number }[]>`
        select w.id, w.delivery_status,
               (select count(*)::int from signalbox.events e where e.wait_id = w.id and e.type <> 'signal.waiting') as resolutions
          from signalbox.waits w`,
      { until: (rows) => rows.every((r) => r.delivery_status !== "pending") }, // recorded just after the receiver answered
    );
    expect(rows).toHaveLength(5);
    for (const row of rows) expect(row, row.id).toMatchObject({ delivery_status: "delivered", resolutions: 1 });
  });
});
