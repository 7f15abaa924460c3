import { sealSecrets } from "../auth/secret-box.ts";
import { withTransaction } from "../db/transaction.ts";
import type { Db } from "../db/client.ts";
import type { SecretBox } from "../auth/secret-box.ts";
import { NotFoundError, UnprocessableError, type ValidationIssue } from "../core/errors.ts";
import { standardWebhooksKey } from "../auth/schemes/standard-webhooks.ts";
import { checkSchema } from "./payload-schema.ts";
import { replayFloorAfter } from "./replay-floor.ts";
import { BODY_ONLY_SCHEMES, toSignalTypeResource, type SignalTypeInput, type SignalTypeResource } from "./signal-type.ts";
import type { SignalTypeCache } from "./signal-type-cache.ts";
import { deleteSignalType, findSignalType, upsertSignalType } from "./signal-types.queries.ts";

/** What the signal-type verbs use of Deps (deps.ts sits a floor above this one: ARCHITECTURE.md). */
export interface SignalTypeDeps {
  db: Db;
  secretBox?: SecretBox;
  signalTypeCache?: SignalTypeCache;
}

export async function declareSignalType(
  deps: Pick<SignalTypeDeps, "db" | "secretBox" | "signalTypeCache">,
  name: string,
  input: SignalTypeInput,
): Promise<{ signalType: SignalTypeResource; created: boolean }> {
  const schema = input.schema === undefined ? null : input.schema;
  const problems = checkSchema(schema);
  if (problems.length > 0) throw new UnprocessableError("the schema is not a usable JSON Schema (draft 2020-12)", problems);
  const authProblems = checkAuth(input.auth);
  if (authProblems.length > 0) throw new UnprocessableError(authProblems.map((p) => `${p.path}: ${p.message}`).join("; "), authProblems);
  const tolerance = { scheme: input.auth.scheme, tolerance_s: input.auth.tolerance_s ?? 300 };
  const { row, created } = await withTransaction(deps.db, async (tx) => {
    const floor = await replayFloorAfter(tx, name, tolerance);
    return upsertSignalType(tx, {
      name,
      description: input.description ?? null,
      schema,
      auth: {
        ...tolerance,
        secrets: sealSecrets(deps.secretBox, input.auth.secrets ?? [], name),
        ...(input.auth.header !== undefined ? { header: input.auth.header.toLowerCase() } : {}),
        ...(input.auth.run_pointer !== undefined ? { run_pointer: input.auth.run_pointer } : {}),
        ...(input.auth.replay_across_runs ? { replay_across_runs: true as const } : {}),
        ...(floor !== undefined ? { replay_floor_s: floor } : {}),
      },
      bufferTtlS: input.buffer_ttl_s ?? 0,
      responses: input.responses ?? null,
      notifyUrl: input.notify_url ?? null,
      remindersS: input.reminders_s ?? [],
      startUrl: input.start?.url ?? null,
    });
  });
  deps.signalTypeCache?.forget(name);
  return { signalType: toSignalTypeResource(row), created };
}

export async function getSignalType(deps: Pick<SignalTypeDeps, "db">, name: string): Promise<SignalTypeResource> {
  const row = await findSignalType(deps.db, name);
  if (!row) throw new NotFoundError(`no signal type named '${name}'`);
  return toSignalTypeResource(row);
}

export async function removeSignalType(deps: Pick<SignalTypeDeps, "db" | "signalTypeCache">, name: string): Promise<void> {
  if (!(await deleteSignalType(deps.db, name))) throw new NotFoundError(`no signal type named '${name}'`);
  deps.signalTypeCache?.forget(name);
}

/** What a declaration's auth must hold beyond its shape: secrets that can verify, and a run binding where the signature has none. */
function checkAuth(auth: SignalTypeInput["auth"]): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  if (auth.scheme === "standard-webhooks") {
    (auth.secrets ?? []).forEach((secret, i) => {
      if (!standardWebhooksKey(secret)?.byteLength) issues.push({ path: `/auth/secrets/${i}`, message: "must be whsec_ followed by base64 (as Standard Webhooks senders are given it)" });
    });
  }
  if (BODY_ONLY_SCHEMES.includes(auth.scheme) && auth.run_pointer === undefined && auth.replay_across_runs !== true) {
    issues.push({
      path: "/auth/run_pointer",
      message: `scheme '${auth.scheme}' signs the body only, so a captured delivery verifies for any run: name the payload field holding the run (run_pointer), or set replay_across_runs: true`,
    });
  }
  return issues;
}
