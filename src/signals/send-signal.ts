import { createHash } from "node:crypto";
import { openSecrets, type SecretBox } from "../auth/secret-box.ts";
import { withTransaction } from "../db/transaction.ts";
import type { Deps } from "../deps.ts";
import { BadRequestError, type ValidationIssue } from "../core/errors.ts";
import { newId } from "../core/ids.ts";
import { valueAt } from "../core/json-pointer.ts";
import { findUnstorable, toStorable } from "../core/storable-text.ts";
import { jsonDepthExceeds, parseNumbersAsWritten } from "../core/json-text.ts";
import type { Queryable, Tx } from "../db/client.ts";
import { lockRun } from "../runs/run-lock.ts";
import { validatePayload } from "../signal-types/payload-schema.ts";
import type { SignalAuth, SignalTypeRow } from "../signal-types/signal-type.ts";
import { loadSignalType } from "../signal-types/signal-type-cache.ts";
import { authenticateIntake, type IntakeCredentials } from "./authenticate-intake.ts";
import { acceptSignals, type IntakeItemAnswer } from "./accept-signals.ts";
import { intakeBatcherFor } from "./intake-batcher.ts";
import { forOneWait, RESERVED_KEY } from "./redrive.queries.ts";
import type { IntakeAnswer } from "./signal-outcome.ts";
import { claimWebhookId, insertRejectedSignal, type NewSignal } from "./signals.queries.ts";

export const MAX_JSON_DEPTH = 64;

export interface SignalIntake {
  runId: string;
  signal: string;
  /** The body exactly as received. */
  body: Uint8Array;
  idempotencyKey?: string;
  credentials: IntakeCredentials;
  /**
   * Approval links: the signal may resolve this wait and no other. It is never buffered and
   * never matched to a later wait of the same name; unless this wait is the run's open one
   * when the signal is recorded (in that statement, under the run's lock) it is
   * `rejected_not_waiting`.
   */
  expectWaitId?: string;
  /**
   * Runs in the intake's transaction just after the run's lock is taken, before anything is
   * recorded; throwing aborts the intake and nothing is written (approval links claim their
   * one use here, so the claim commits if and only if the signal's record does).
   */
  claim?: (tx: Tx) => Promise<void>;
}

// ignoreBOM keeps a leading BOM in the text, where JSON.parse refuses it: the body is JSON
// exactly as signed, or it is invalid_json (never silently altered).
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Takes one signal from an external sender: authenticate, parse, validate, then in one
 * transaction under the run's lock resolve the open wait (or buffer, or reject) and record it.
 * Intake itself is one SQL function, signalbox.accept_signals: usually in a batch of the intake
 * batcher (shared with signals arriving at the same moment); an approval link calls it in the
 * transaction that claims the link.
 */
export async function sendSignal(deps: Pick<Deps, "db" | "secretBox" | "signalTypeCache"> & Partial<Pick<Deps, "config" | "metrics" | "callbackHandOff">>, input: SignalIntake): Promise<IntakeAnswer> {
  const type = await loadSignalType(deps, input.signal);
  if (!type) {
    // API.md: 404 for an unknown type. Only a management caller is authenticated, so only its
    // attempt is worth a line in the signal log.
    const answer: IntakeAnswer = { outcome: "rejected_unknown_signal", detail: `no signal type named '${input.signal}'` };
    if (!input.credentials.management) return answer;
    return recordRejection(deps.db, { runId: input.runId, signal: input.signal, payload: null, payloadHash: null, idempotencyKey: input.idempotencyKey ?? null }, "rejected_unknown_signal", answer.detail);
  }
  const typeAuth = openAuth(deps.secretBox, type);
  const auth = authenticateIntake(typeAuth, input);
  if (!auth.ok) return UNAUTHENTICATED;
  // The signed webhook-id is the sender's idempotency key, so it is refused where an
  // Idempotency-Key header would be (signals.router.ts): as `link:...` or `console:...` it would
  // take the key of an approval link's or the console's answer for this run.
  if (auth.webhookId !== undefined && forOneWait(auth.webhookId)) throw reservedWebhookId();
  const parsed = parseBody(input.body);

  // A body-only signature does not cover the URL: bind it to the run through the payload.
  // Checked before the webhook-id is claimed: a copy sent to another run's URL is refused
  // without a receipt, so it cannot take the id from the genuine delivery to the named run. A
  // body that is not JSON names no run: it is recorded as invalid_json below, as before.
  if (!input.credentials.management && typeAuth.run_pointer !== undefined && "value" in parsed && !pointsAtRun(parsed, typeAuth.run_pointer, input.runId)) {
    return UNAUTHENTICATED;
  }
  // A signed webhook-id belongs to the first run it reached, whatever became of it there: a
  // replay to another run's URL is refused before anything (even a rejection) is recorded.
  if (auth.webhookId && (await claimWebhookId(deps.db, type.name, auth.webhookId, input.runId, 2 * typeAuth.tolerance_s)) !== input.runId) {
    return UNAUTHENTICATED;
  }
  // From here the sender is authenticated: every answer is recorded in the signal log.
  const unparsed = { runId: input.runId, signal: input.signal, payload: null, payloadHash: null, idempotencyKey: auth.webhookId ?? input.idempotencyKey ?? null };

  if ("error" in parsed) return recordRejection(deps.db, unparsed, "invalid_json", parsed.error);
  if ("tooDeep" in parsed) {
    const problems = [{ path: "", message: `must not nest deeper than ${MAX_JSON_DEPTH} levels` }];
    return recordRejection(deps.db, unparsed, "rejected_invalid_payload", "the payload nests too deeply", problems);
  }

  // The signed webhook-id, when there is one, is the key: an unsigned Idempotency-Key header
  // must not turn a replayed delivery into a new signal.
  const key = auth.webhookId ?? input.idempotencyKey;
  const record: Omit<NewSignal, "id" | "outcome"> = {
    runId: input.runId,
    signal: input.signal,
    payload: parsed.text,
    payloadHash: createHash("sha256").update(input.body).digest("base64url"),
    idempotencyKey: key ?? null,
  };

  const problems = checkPayload(type, parsed.value, parsed.text);
  if (problems.length > 0) return recordRejection(deps.db, record, "rejected_invalid_payload", "the payload does not satisfy the signal type's schema", problems);

  const item = { ...record, id: newId("sg"), bufferTtlS: type.bufferTtlS, startUrl: type.startUrl };
  if (input.claim === undefined && input.expectWaitId === undefined) {
    return intakeAnswer(await intakeBatcherFor(deps.db, deps.config?.SIGNALBOX_DB_POOL_SIZE ?? 8, deps.metrics, deps.callbackHandOff).accept(item), record);
  }
  // Approval links: the link's claim and the signal commit together, or neither does.
  const { claim, expectWaitId } = input;
  const [answer] = await withTransaction(deps.db, async (tx) => {
    await lockRun(tx, record.runId);
    if (claim) await claim(tx);
    return acceptSignals(tx, [{ ...item, ...(expectWaitId !== undefined ? { expectWaitId, bufferTtlS: 0 } : {}) }]);
  });
  return intakeAnswer(answer!, record);
}

/** The intake answer for what `signalbox.accept_signals` did. */
function intakeAnswer(a: IntakeItemAnswer, record: Pick<NewSignal, "runId" | "signal">): IntakeAnswer {
  switch (a.outcome) {
    case "received":
    case "buffered":
    case "started":
    case "duplicate":
      return { outcome: a.outcome, signal_id: a.signalId, sequence: a.sequence, wait_id: a.waitId, run_id: a.runId };
    case "rejected_idempotency_conflict":
      return { outcome: a.outcome, signal_id: a.signalId, run_id: a.runId, detail: IDEMPOTENCY_CONFLICT };
    case "rejected_not_active":
      return { outcome: a.outcome, signal_id: a.signalId, run_id: a.runId, detail: notActive(a.runId) };
    case "rejected_not_waiting":
      return { outcome: a.outcome, signal_id: a.signalId, run_id: a.runId, detail: notWaiting({ ...record, runId: a.runId }) };
  }
}

const IDEMPOTENCY_CONFLICT = "this idempotency key was used with a different payload";
const notActive = (runId: string) => `run '${runId}' is cancelled`;
const notWaiting = (r: Pick<NewSignal, "runId" | "signal">) => `run '${r.runId}' has no open wait for signal '${r.signal}'`;

type RecordedRejection = "rejected_unknown_signal" | "invalid_json" | "rejected_invalid_payload" | "rejected_idempotency_conflict" | "rejected_not_active" | "rejected_not_waiting";

/**
 * Records a rejection in the signal log (never numbered) and answers it. Decided before any run
 * lock, so it is the log of the run addressed, continued or not (run_id says so).
 */
async function recordRejection(
  q: Queryable,
  record: Omit<NewSignal, "id" | "outcome">,
  outcome: RecordedRejection,
  detail: string,
  problems?: ValidationIssue[],
): Promise<IntakeAnswer> {
  const id = newId("sg");
  await insertRejectedSignal(q, { ...record, id, outcome, validationErrors: problems ?? null });
  return { outcome, detail, signal_id: id, run_id: record.runId, ...(problems ? { validation_errors: problems } : {}) };
}

const UNAUTHENTICATED: IntakeAnswer = { outcome: "rejected_unauthenticated", detail: "signature verification failed" };

const reservedWebhookId = () => new BadRequestError(`invalid header: /webhook-id: ${RESERVED_KEY}`, [{ path: "/webhook-id", message: RESERVED_KEY }]);

function parseBody(body: Uint8Array): { text: string; value: unknown } | { error: string } | { tooDeep: true } {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return { error: "the body is not valid UTF-8" };
  }
  // Checked before parsing: JSON.parse on hostile nesting would exhaust the stack.
  if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) return { tooDeep: true };
  try {
    return { text, value: JSON.parse(text) };
  } catch (err) {
    return { error: `the body is not JSON: ${(err as Error).message}` };
  }
}

function checkPayload(type: SignalTypeRow, value: unknown, text: string): ValidationIssue[] {
  const issues = validatePayload(type.schema, value, text);
  if (type.responses && type.responses.length > 0) {
    const response = value && typeof value === "object" ? (value as Record<string, unknown>).response : undefined;
    if (typeof response !== "string" || !type.responses.includes(response)) {
      issues.push({ path: "/response", message: `must be one of: ${type.responses.join(", ")}` });
    }
  }
  const unsafe = findUnstorable(value);
  if (unsafe !== null) issues.push({ path: unsafe, message: "must not contain \\u0000 or unpaired UTF-16 surrogates" });
  // A pointer names the offending key, which may itself hold NUL or a lone surrogate: make it
  // storable (validation_errors is jsonb) and printable.
  return issues.slice(0, 20).map((i) => ({ path: toStorable(i.path), message: toStorable(i.message) }));
}



/** The type's auth with its signing secrets decrypted for this request only. */
function openAuth(box: SecretBox | undefined, type: SignalTypeRow): SignalAuth {
  const auth = type.auth as SignalAuth;
  return { ...auth, secrets: openSecrets(box, auth.secrets, type.name) };
}

/**
 * True when the JSON Pointer `pointer` in the body holds the run id: a string, or a number whose
 * digits as written are the run id's. Through a double, 12345678901234567891 would be run
 * 12345678901234567000 (a delivery signed for one run, accepted at another's URL), and 1.0 run 1.
 */
function pointsAtRun(parsed: { text: string; value: unknown }, pointer: string, runId: string): boolean {
  const here = valueAt(parsed.value, pointer);
  if (typeof here === "number") return valueAt(parseNumbersAsWritten(parsed.text), pointer) === runId;
  return here === runId;
}
