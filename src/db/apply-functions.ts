import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import type postgres from "postgres";

export interface FunctionSource {
  /** The file name, e.g. `open_wait.sql`: the key of its row in signalbox.function_sources. */
  file: string;
  text: string;
  sha256: string;
}

/** Every `*.sql` file of `dir`, in name order (each holds `create or replace` statements only). */
export async function readFunctionSources(dir: string): Promise<FunctionSource[]> {
  const files = (await fs.readdir(dir)).filter((f) => f.endsWith(".sql")).sort();
  return Promise.all(
    files.map(async (file) => {
      const text = await fs.readFile(path.join(dir, file), "utf8");
      return { file, text, sha256: createHash("sha256").update(text).digest("hex") };
    }),
  );
}

/**
 * Brings the database's SQL functions to what db/functions holds. Functions are source, not
 * history: a migration that once created one is never edited, and a database migrated at any
 * earlier commit gets today's body here. A file is applied only when its digest differs from
 * the one recorded, so a restart replaces nothing and running processes keep their cached
 * plans. The changed files go in one transaction: a function and the one it calls change
 * together (accept_signals calling resolve_waits with a new argument), so processes still
 * running see the old set or the new, never a caller without its callee. The caller holds the
 * migration lock.
 */
export async function applyFunctions(client: postgres.Sql, sources: FunctionSource[]): Promise<string[]> {
  const rows = await client<{ file: string; sha256: string }[]>`select file, sha256 from signalbox.function_sources`;
  const applied = new Map(rows.map((r) => [r.file, r.sha256]));
  const changed = sources.filter((s) => applied.get(s.file) !== s.sha256);
  if (changed.length > 0) {
    await client.begin(async (tx) => {
      for (const source of changed) {
        await tx.unsafe(source.text); // simple protocol: a file may hold several statements
        await tx`
          insert into signalbox.function_sources (file, sha256) values (${source.file}, ${source.sha256})
          on conflict (file) do update set sha256 = excluded.sha256, applied_at = now()`;
      }
    });
  }
  // A file removed from db/functions (its functions are dropped by the file that replaced them)
  // is no longer source: forget its digest.
  const gone = [...applied.keys()].filter((file) => !sources.some((s) => s.file === file));
  if (gone.length > 0) await client`delete from signalbox.function_sources where file in ${client(gone)}`;
  return changed.map((s) => s.file);
}
