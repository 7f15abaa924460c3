import { sql } from "drizzle-orm";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { ServiceError } from "../core/errors.ts";
import { getRunResource, type RunResource } from "./get-run.ts";

export interface ContinueInput {
  runId: string;
  /** The new run: where the run's buffered signals and every later signal and wait go. */
  newRunId: string;
  by?: string;
  reason?: string;
}

/** Why a continue was refused: each a 409 whose problem `title` is the code (its `type` ends in it). */
export const CONTINUE_REFUSALS = ["already_continued", "run_cancelled", "continue_cycle", "target_has_predecessor", "target_cancelled"] as const;
type Refusal = (typeof CONTINUE_REFUSALS)[number];

class ContinueRefused extends ServiceError {
  constructor(code: Refusal, detail: string, extra: Record<string, unknown> = {}) {
    super(409, code, detail, extra);
  }
}

/**
 * Continue-as-new: marks the run continued as `newRunId`, in one transaction under both runs'
 * locks (signalbox.continue_run, db/functions/run_chain.sql): its open waits are cancelled with
 * reason `continued` (callbacks `signal.cancelled`), its buffered signals move to the newest run
 * of the new run's chain, and from then on every signal and wait addressed to it goes there.
 * Continuing to the same run again changes nothing (the run as it is).
 */
export async function continueRun(deps: Pick<Deps, "db">, input: ContinueInput): Promise<RunResource> {
  return withTransaction(deps.db, async (tx) => {
    const [row] = await tx.execute<{ answer: string; continued_as: string | null }>(sql`
      select answer, continued_as from signalbox.continue_run(${input.runId}::text, ${input.newRunId}::text, ${input.by ?? null}::text, ${input.reason ?? null}::text)`);
    const { runId, newRunId } = input;
    switch (row!.answer) {
      case "continued":
      case "unchanged":
        return getRunResource(tx, runId);
      case "already_continued":
        throw new ContinueRefused("already_continued", `run '${runId}' was already continued as '${row!.continued_as}'`, { continued_as: row!.continued_as });
      case "run_cancelled":
        throw new ContinueRefused("run_cancelled", `run '${runId}' is cancelled: there is nothing to continue`);
      case "cycle":
        throw new ContinueRefused(
          "continue_cycle",
          runId === newRunId ? `run '${runId}' cannot continue as itself` : `run '${newRunId}' leads back to '${runId}' through its chain: continuing would close a cycle`,
        );
      case "target_has_predecessor":
        throw new ContinueRefused("target_has_predecessor", `another run was already continued as '${newRunId}' (a chain has one run before each)`);
      case "target_cancelled":
        throw new ContinueRefused("target_cancelled", `run '${newRunId}' (or the newest run of its chain) is cancelled`);
      default:
        throw new Error(`continue_run: unknown answer ${row!.answer}`);
    }
  });
}
