import { createHash } from "node:crypto";
import type { Deps } from "../deps.ts";
import { BadRequestError, ConflictError, NotFoundError } from "../core/errors.ts";
import { isStorable } from "../core/storable-text.ts";
import { MAX_COMMENT_CHARS } from "../approvals/respond-to-link.ts";
import { findKeyHolder } from "../approvals/approvals.queries.ts";
import { loadSignalType } from "../signal-types/signal-type-cache.ts";
import { sendSignal } from "../signals/send-signal.ts";
import type { IntakeAnswer } from "../signals/signal-outcome.ts";
import { findWait } from "../waits/waits.queries.ts";

export interface ApprovalAnswer {
  waitId: string;
  response: string;
  /** The signed-in operator: the payload's `responder`, one vote per responder on a quorum wait. */
  responder: string;
  comment?: string;
}

/**
 * An operator answers an approval from the console: `{response, responder, comment}` goes
 * through the one intake verb (sendSignal) as the wait's signal, like an approval link's
 * answer, aimed at this wait alone (never buffered, never a later wait of the same name).
 * The idempotency key is the wait and the operator: answering again is a `duplicate`, and a
 * different answer from the same operator is refused rather than counted twice. When the
 * signal holding the key is not this operator's answer, that is a 409 saying so.
 */
export async function answerApproval(deps: Pick<Deps, "db" | "secretBox" | "signalTypeCache">, input: ApprovalAnswer): Promise<{ answer: IntakeAnswer; stillWaiting: boolean; signal: string }> {
  const wait = await findWait(deps.db, input.waitId);
  if (!wait) throw new NotFoundError(`no wait '${input.waitId}' is known`);
  // A timer, sensor or composite raises its own signal: an answer could never resolve it (as
  // POST /waits/{id}/links refuses it), though its name may be an approval type's.
  if (wait.kind !== "external") throw new ConflictError(`this wait is a ${wait.kind} wait, not one for an answer from outside: it cannot be answered here`);
  const type = await loadSignalType(deps, wait.signal);
  const responses = type?.responses ?? [];
  if (responses.length === 0) throw new ConflictError(`the signal type '${wait.signal}' declares no responses: this wait is not an approval`);
  if (!responses.includes(input.response)) {
    throw new BadRequestError(`the response must be one of ${responses.join(", ")}`, [{ path: "/response", message: "is not an allowed response" }]);
  }
  const comment = (input.comment ?? "").replace(/\r\n?/g, "\n").trim();
  if (!isStorable(comment) || comment.length > MAX_COMMENT_CHARS) {
    throw new BadRequestError(`the comment must be text of at most ${MAX_COMMENT_CHARS} characters`, [{ path: "/comment", message: "is unusable" }]);
  }
  const payload = { response: input.response, responder: input.responder, ...(comment ? { comment } : {}) };
  const who = createHash("sha256").update(input.responder).digest("base64url").slice(0, 22);
  const key = `console:${wait.id}:${who}`;
  const answer = await sendSignal(deps, {
    runId: wait.runId,
    signal: wait.signal,
    body: Buffer.from(JSON.stringify(payload)),
    idempotencyKey: key,
    // The operator signed in with a management credential: accepted for any signal type.
    credentials: { management: true, headers: () => [], nowSeconds: Math.floor(Date.now() / 1000) },
    expectWaitId: wait.id,
  });
  // The console says "you had already answered differently": true only if the signal holding
  // the key is this operator's own answer, not one someone else sent under the key.
  if (answer.outcome === "rejected_idempotency_conflict" && !answeredBy(await findKeyHolder(deps.db, wait.runId, wait.signal, key), input.responder)) {
    throw new ConflictError("your answer was not recorded: another signal already holds its idempotency key");
  }
  const after = answer.outcome === "received" ? await findWait(deps.db, wait.id) : undefined;
  return { answer, stillWaiting: after?.status === "waiting", signal: wait.signal };
}

/** Whether a recorded signal is an answer from `responder` (its payload names them). */
function answeredBy(holder: { payload: string | null } | undefined, responder: string): boolean {
  if (!holder?.payload) return false;
  try {
    return (JSON.parse(holder.payload) as { responder?: unknown } | null)?.responder === responder;
  } catch {
    return false;
  }
}
