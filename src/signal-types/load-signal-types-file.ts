import fs from "node:fs/promises";
import { DrizzleQueryError } from "drizzle-orm";
import { ServiceError } from "../core/errors.ts";
import { findUnstorable } from "../core/storable-text.ts";
import { declareSignalType, type SignalTypeDeps } from "./declare-signal-type.ts";
import { SignalTypeBodySchema } from "./signal-type-body.ts";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/**
 * Applies SIGNALBOX_SIGNAL_TYPES_FILE at start, entry by entry, as PUTs. A secret written
 * "env:NAME" is read from that environment variable. Any problem stops the start with a
 * message naming the entry and the field.
 */
export async function loadSignalTypesFile(deps: Pick<SignalTypeDeps, "db" | "secretBox">, file: string, env: Record<string, string | undefined>): Promise<string[]> {
  let doc: unknown;
  try {
    doc = JSON.parse(await fs.readFile(file, "utf8"));
  } catch (err) {
    throw new Error(`SIGNALBOX_SIGNAL_TYPES_FILE ${file}: ${(err as Error).message}`);
  }
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) {
    throw new Error(`SIGNALBOX_SIGNAL_TYPES_FILE ${file}: must be a JSON object of {"<name>": <signal type>}`);
  }
  const names: string[] = [];
  for (const [name, entry] of Object.entries(doc)) {
    const where = `SIGNALBOX_SIGNAL_TYPES_FILE ${file}: entry '${name}'`;
    if (!NAME.test(name)) throw new Error(`${where}: the name must be 1 to 100 characters from A-Z a-z 0-9 . _ -`);
    // As a PUT's body is checked (src/http/input-guard.ts): the database would refuse it.
    const unstorable = findUnstorable(entry);
    if (unstorable !== null) throw new Error(`${where}, field '${unstorable}': must not contain NUL or unpaired UTF-16 surrogates`);
    const parsed = SignalTypeBodySchema.safeParse(entry);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new Error(`${where}, field '${issue.path.join(".") || "(entry)"}': ${issue.message}`);
    }
    const secrets = (parsed.data.auth.secrets ?? []).map((s, i) => {
      if (!s.startsWith("env:")) return s;
      const value = env[s.slice(4)];
      if (!value) throw new Error(`${where}, field 'auth.secrets.${i}': environment variable ${s.slice(4)} is not set`);
      return value;
    });
    try {
      await declareSignalType(deps, name, { ...parsed.data, auth: { ...parsed.data.auth, secrets } });
    } catch (err) {
      if (err instanceof ServiceError) {
        const issue = (err.extra.validation_errors as Array<{ path: string; message: string }> | undefined)?.[0];
        throw new Error(`${where}, field '${issue?.path ?? ""}': ${issue?.message ?? err.message}`);
      }
      // drizzle's message lists the query's parameters, this entry's secrets among them.
      if (err instanceof DrizzleQueryError) throw new Error(`${where}: ${err.cause instanceof Error ? err.cause.message : "the database refused it"}`);
      throw err;
    }
    names.push(name);
  }
  return names;
}
