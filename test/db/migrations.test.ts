import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { readFunctionSources } from "../../src/db/apply-functions.ts";
import { FUNCTIONS_DIR, MIGRATIONS_DIR, migrateDatabase } from "../../src/db/migrate.ts";
import { describeSchema } from "../helpers/schema-description.ts";
import { createTestDatabase } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

/**
 * Every committed migration, by digest. Databases already ran these files: a changed file is
 * never run again where it matters, so a change goes into a new migration (and a function into
 * db/functions). A new migration adds its line here once.
 */
const COMMITTED: Record<string, string> = {
  "0000_init.sql": "0e4c8f439cf6dd20b7fb5c13257a2889c132060f35cd6fd684ec06b1cc2e1c48",
  "0001_webhook_receipts.sql": "d9fd740c710055548e9e5b96288601c6c68114c91e8bae1067acd24eafbbcd38",
  "0002_run_control.sql": "d9dcba8c40573b6e4f2dae2fb65dcd27c3a4a809468dbc4a088213984fb1d987",
  "0003_events_notify.sql": "bf589dab852dae5831d63d5a5a7c02006f429cbd2619e407dbb477e4f76b30f8",
  "0004_broker_signals.sql": "78efe042012e7358f844b945de05b365f5b96e1f959234e0986d91466a4df807",
  "0005_signal_types_notify.sql": "65f65cc2064e9a74aa392f6d3c73393e9629640ae00a501aafe3c26e873f812e",
  "0006_accept_signals.sql": "79075bc1fac8ade03d855aa43b7743424fb7e0ac35ae37fdbf5015a7baee292b",
  "0007_waits_metadata_partial.sql": "3d6da05798103765d763427b94ebc2d5b7f4277105d3c7f087503088fcbbf71e",
  "0008_open_wait.sql": "09b795f2862e04dfc231c05b77f4a85fa1dd2b4b2c3ae81f03a16f0b8dd6eb44",
  "0009_function_sources.sql": "3e1621cd073d57af8b6e4a32a45a547c4aaff4d729df5c6f2aa562a2f383b54d",
  "0010_retention.sql": "89fd21e9060734400706f52023f421ead869c9d89bb51cf9183d129988ee309d",
  "0011_rejected_signal_bounds.sql": "e5ee5f269b20a5d0aebbb1b295c9a74bf5f911fd166c6301e152c006aeffc6c0",
  "0012_invariants.sql": "c9abf04d3cd63f7793b6bbeb52c959e9263d904bd49d158dcbedd216bac33484",
  "0013_visible_deliveries.sql": "0efafae2a64fc132b2776e83c0536944cb710ed20c07214cc09f7d1c932442a0",
  "0014_foreign_keys.sql": "5274586dc1eb52eede7275bc153831a50f6f90a6b8fca3b78a7b73a3385adce3",
  "0015_redrive.sql": "b18ee2d30a41573ab7209b3770289cabbf6d2b04cb7359238ded61e1d96f69a3",
  "0016_continue.sql": "1fb6d4c9ed386eff91b1dd5b08c0e98affe89ccc36043f58deda7881bd3b4146",
  "0017_replies.sql": "ebdc26d6ce8be19d0d38d9a3c88e02a21e77cf260e692f0f68069852d3e787b7",
  "0018_signal_start.sql": "a824084af64f8065220b7c02b3e7d78ce8ecc75e26877ce9187a47cfdee98c83",
  "0019_open_signal_deadline.sql": "4ee3fa2984b0cd508e94ce2535a7876b959e4bac924d7e64d9bc4499cb23ec1e",
  "0020_waits_fillfactor.sql": "e16743377ee1e565505ceac14e359715b23f8a27374d2366d29195d462b97dba",
  "0021_waits_fillfactor_reset.sql": "05f500bc259f976d3fb4c3cdab787770487d188138146f98d5118362b347f1eb",
  "0022_delivery_round.sql": "cd36275a30fdb85fbb2732066f344c1e6c79c73bca6d169d5a8ec7bd5e9d1726",
};

/**
 * The latest `when` any database may have recorded: 0006 once carried it (databases migrated
 * between 9e546e6 and 44390ff hold it). drizzle skips every entry not later than the newest
 * recorded, so each migration after 0008 must be later than this.
 */
const LATEST_WHEN_EVER_RECORDED = 1795400000000;

interface JournalEntry {
  idx: number;
  when: number;
  tag: string;
}

const journal = async (): Promise<JournalEntry[]> =>
  (JSON.parse(await fs.readFile(path.join(MIGRATIONS_DIR, "meta/_journal.json"), "utf8")) as { entries: JournalEntry[] }).entries;

describe("committed migrations", () => {
  it("are never edited: each file keeps the digest it was committed with", async () => {
    const files = (await fs.readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith(".sql")).sort();
    const digests = Object.fromEntries(
      await Promise.all(files.map(async (f) => [f, createHash("sha256").update(await fs.readFile(path.join(MIGRATIONS_DIR, f))).digest("hex")] as const)),
    );
    expect(digests).toEqual(COMMITTED);
  });

  it("are journalled in order, each later than every one before it (drizzle skips any that is not)", async () => {
    const entries = await journal();
    expect(entries.map((e) => `${e.tag}.sql`)).toEqual(Object.keys(COMMITTED));
    entries.forEach((e, i) => {
      expect(e.idx).toBe(i);
      if (i > 0) expect(e.when, e.tag).toBeGreaterThan(entries[i - 1]!.when);
      if (e.idx > 8) expect(e.when, e.tag).toBeGreaterThan(LATEST_WHEN_EVER_RECORDED);
    });
  });
});

describe("SQL functions", () => {
  const dbs: Array<{ drop(): Promise<void> }> = [];
  afterAll(async () => {
    for (const db of dbs) await db.drop();
  });

  it("are what db/functions holds, and nothing else is", async () => {
    const db = await createTestDatabase();
    dbs.push(db);
    const client = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      const sources = await readFunctionSources(FUNCTIONS_DIR);
      const recorded = await client<{ file: string; sha256: string }[]>`select file, sha256 from signalbox.function_sources order by file`;
      expect(recorded.map((r) => [r.file, r.sha256])).toEqual(sources.map((s) => [s.file, s.sha256]));

      const declared = sources.flatMap((s) => [...s.text.matchAll(/CREATE OR REPLACE FUNCTION "signalbox"\."(\w+)"/g)].map((m) => m[1]!)).sort();
      const held = await client<{ proname: string }[]>`
        select p.proname from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'signalbox' order by p.proname`;
      expect(held.map((r) => r.proname)).toEqual(declared);
      // Re-applying a function file gives back exactly the function the database holds.
      const before = await describeSchema(client);
      for (const s of sources) await client.unsafe(s.text);
      expect(await describeSchema(client)).toEqual(before);
    } finally {
      await client.end();
    }
  });
});

describe("migrating", () => {
  it("twice at once on an empty database is safe, and both see the same schema", async () => {
    const [fresh, template] = [await createTestDatabase({ empty: true }), await createTestDatabase()];
    const clients = [postgres(fresh.url, { max: 1, onnotice: () => {} }), postgres(template.url, { max: 1, onnotice: () => {} })];
    try {
      await Promise.all([migrateDatabase(fresh.url), migrateDatabase(fresh.url), migrateDatabase(fresh.url)]);
      expect(await describeSchema(clients[0]!)).toEqual(await describeSchema(clients[1]!));
      const recorded = await clients[0]!`select 1 from drizzle.signalbox_migrations`;
      expect(recorded.length).toBe(Object.keys(COMMITTED).length);
    } finally {
      for (const c of clients) await c.end();
      await fresh.drop();
      await template.drop();
    }
  });

  it("packs the waits' pages full (0020 left 30 % free; 0021 undid it: opening a wait cost twice the CPU)", async () => {
    const db = await createTestDatabase();
    const client = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      const [table] = await client<{ reloptions: string[] | null }[]>`select reloptions from pg_class where oid = 'signalbox.waits'::regclass`;
      expect(table!.reloptions ?? []).not.toContainEqual(expect.stringMatching(/^fillfactor=/));
    } finally {
      await client.end();
      await db.drop();
    }
  });

  it("a start behind another process's migration says so, then migrates once the lock is free", async () => {
    const db = await createTestDatabase();
    const holder = postgres(db.url, { max: 1, onnotice: () => {} });
    try {
      await holder`select pg_advisory_lock(hashtext('signalbox:migrations'))`;
      let told = 0;
      const migrating = migrateDatabase(db.url, undefined, () => told++);
      await waitFor("the start to say it waits", () => told, { until: (n) => n === 1 });
      await holder`select pg_advisory_unlock(hashtext('signalbox:migrations'))`;
      expect(await migrating).toEqual({ functions: "applied" });
      expect(told).toBe(1);
    } finally {
      await holder.end();
      await db.drop();
    }
  });

  it("an older release (its newest migration older than the database's) keeps the newer SQL functions; the same release applies its own", async () => {
    const db = await createTestDatabase();
    const client = postgres(db.url, { max: 1, onnotice: () => {} });
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "signalbox-older-release-"));
    try {
      // The older release: every migration but the newest, and a function file of its own.
      const older = { migrations: path.join(dir, "migrations"), functions: path.join(dir, "functions") };
      await fs.cp(MIGRATIONS_DIR, older.migrations, { recursive: true });
      await fs.cp(FUNCTIONS_DIR, older.functions, { recursive: true });
      const journalFile = path.join(older.migrations, "meta", "_journal.json");
      const journal = JSON.parse(await fs.readFile(journalFile, "utf8")) as { entries: Array<{ tag: string }> };
      const newest = journal.entries.pop()!;
      await fs.rm(path.join(older.migrations, `${newest.tag}.sql`));
      await fs.writeFile(journalFile, JSON.stringify(journal));
      await fs.appendFile(path.join(older.functions, "constants.sql"), "\n-- as an older release wrote it\n");
      const digest = async () => (await client<Array<{ sha256: string }>>`select sha256 from signalbox.function_sources where file = 'constants.sql'`)[0]!.sha256;
      const before = await digest();

      expect(await migrateDatabase(db.url, older)).toEqual({ functions: "kept_newer" });
      expect(await digest()).toBe(before);

      // The same migrations as the database's: its functions are this release's.
      expect(await migrateDatabase(db.url, { migrations: MIGRATIONS_DIR, functions: older.functions })).toEqual({ functions: "applied" });
      expect(await digest()).not.toBe(before);
    } finally {
      await client.end();
      await fs.rm(dir, { recursive: true, force: true });
      await db.drop();
    }
  });
});
