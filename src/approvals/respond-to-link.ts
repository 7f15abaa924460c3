import type { Deps } from "../deps.ts";
import { debugPoint } from "../core/debug-point.ts";
import { ServiceError, type ValidationIssue } from "../core/errors.ts";
import { sendSignal } from "../signals/send-signal.ts";
import type { WaitStatus } from "../waits/wait-view.ts";
import { findWait } from "../waits/waits.queries.ts";
import { verifyLink, type LinkClaims } from "./approval-links.ts";
import { claimLink, findKeyHolder, findLinkUse } from "./approvals.queries.ts";
import { isStorable } from "../core/storable-text.ts";

export const MAX_COMMENT_CHARS = 2000;
/**
 * The largest answer form read: the longest comment, every character percent-encoded from up
 * to three UTF-8 bytes (9 bytes a character), and room for the field names. A larger body is
 * refused unread.
 */
export const MAX_FORM_BYTES = 9 * MAX_COMMENT_CHARS + 2048;

export type LinkProblem = "invalid" | "expired" | "unknown_wait" | "used" | "not_waiting" | "bad_comment" | "refused" | "key_taken";

/** Why a link cannot be answered, said for the person holding it (the page shows title and detail). */
export class LinkError extends ServiceError {
  readonly reason: LinkProblem;
  override readonly type: string;
  constructor(reason: LinkProblem, status: number, title: string, detail: string, extra: Record<string, unknown> = {}) {
    super(status, title, detail, { reason, ...extra });
    this.reason = reason;
    this.type = `https://signalbox.dev/problems/link-${reason.replace(/_/g, "-")}`;
  }
}

const invalid = () => new LinkError("invalid", 400, "This link is not valid", "It may have been copied incompletely or changed. Ask for a new link.");
const expired = () => new LinkError("expired", 410, "This link has expired", "Ask for a new link if an answer is still needed.");
export const formTooLarge = () =>
  new LinkError("bad_comment", 413, "The answer is too large", `The form may hold a comment of at most ${MAX_COMMENT_CHARS} characters. The link was not used.`);
const used = () => new LinkError("used", 409, "This link has already been used", "An answer was already given with it; it works once.");
const keyTaken = () =>
  new LinkError("key_taken", 409, "This link cannot be answered", "Another signal was already sent under this link's idempotency key, so no answer can be recorded with it. Ask for a new link.");
const notWaiting = () => new LinkError("not_waiting", 409, "No answer is needed any more", "The request this link was made for has been settled, cancelled or has timed out.");

export interface OpenLink {
  claims: LinkClaims;
  wait: { id: string; runId: string; signal: string };
}

/**
 * Reads a link without acting on it (GET: mail scanners fetch links): verifies it and checks
 * that its wait, the same version of it, is still waiting and the link unused. These checks
 * are for the page; when answering, the intake transaction decides again under the run's lock.
 */
export async function inspectLink(deps: Pick<Deps, "db" | "secrets">, token: string): Promise<OpenLink> {
  const claims = await checkLinkToken(deps, token);
  const wait = await findWait(deps.db, claims.waitId);
  if (!wait) throw new LinkError("unknown_wait", 404, "Nothing is waiting for this answer", "The request this link was made for does not exist.");
  if (await findLinkUse(deps.db, claims.linkId)) throw used();
  // A wait's created_at never changes: a link names the wait as it was when the link was made.
  if (wait.createdAt.getTime() !== claims.version || wait.status !== "waiting") throw notWaiting();
  return { claims, wait: { id: wait.id, runId: wait.runId, signal: wait.signal } };
}

/**
 * The link's signature and expiry alone: pure, no database. Anyone may POST to any link path,
 * so this runs before anything else about the request is read.
 */
export async function checkLinkToken(deps: Pick<Deps, "secrets">, token: string): Promise<LinkClaims> {
  const verified = await verifyLink(deps.secrets.linkKeys, token);
  if (!verified.ok) throw verified.reason === "expired" ? expired() : invalid();
  return verified.claims;
}

export interface LinkAnswered extends OpenLink {
  comment?: string;
  /** The wait after this answer: `received`, or still `waiting` for more votes (quorum). */
  waitStatus: WaitStatus;
}

/**
 * Answers a link (POST): sends `{response, responder, comment}` as the wait's signal through
 * the one intake path (sendSignal), which in one transaction under the run's lock
 * - claims the link's one use (link_uses primary key: a second use, even a concurrent one,
 *   finds the claim and records nothing), unless another signal holds the link's idempotency
 *   key (then nothing is recorded, the claim neither), and
 * - records the signal against this wait only (expectWaitId): never buffered, never a later
 *   wait with the same name, refused if this wait is no longer the open one.
 */
export async function respondToLink(deps: Pick<Deps, "db" | "secrets" | "secretBox">, token: string, rawComment: string | undefined): Promise<LinkAnswered> {
  const open = await inspectLink(deps, token);
  const comment = normaliseComment(rawComment);
  const { claims, wait } = open;
  await debugPoint("respond-to-link:checked", wait.id); // tests: let the wait change after the friendly checks

  const payload = { response: claims.response, responder: claims.responder, ...(comment ? { comment } : {}) };
  const key = `link:${claims.linkId}`; // names the link in the signal log
  const answer = await sendSignal(deps, {
    runId: wait.runId,
    signal: wait.signal,
    body: Buffer.from(JSON.stringify(payload)),
    idempotencyKey: key,
    // The signed link is the sender's credential: it was made with a management token.
    credentials: { management: true, headers: () => [], nowSeconds: Math.floor(Date.now() / 1000) },
    expectWaitId: wait.id,
    claim: async (tx) => {
      if (!(await claimLink(tx, claims.linkId, wait.id))) throw used();
      // The link is unused, so a signal holding its key was sent by someone else: intake would
      // refuse this answer as a duplicate or conflict and the claim would commit with that
      // refusal, using the link up for nothing. Checked here, under the run's lock intake takes
      // too, so throwing rolls the claim back.
      if (await findKeyHolder(tx, wait.runId, wait.signal, key)) throw keyTaken();
    },
  });
  switch (answer.outcome) {
    case "received": {
      const after = await findWait(deps.db, wait.id);
      return { ...open, ...(comment ? { comment } : {}), waitStatus: (after?.status ?? "received") as WaitStatus };
    }
    // Caught by the claim above; here only when the run was continued and the key is held on a
    // later run of its chain (then this wait was cancelled by the continue: the link is spent anyway).
    case "duplicate":
    case "rejected_idempotency_conflict":
      throw keyTaken();
    case "rejected_not_waiting":
    case "rejected_not_active":
    case "rejected_unknown_signal": // its signal type was deleted since the link was made
      throw notWaiting();
    case "rejected_invalid_payload":
      throw new LinkError("refused", 422, "This answer was not accepted", "The request no longer accepts this answer in this form. Ask for a new link.", {
        validation_errors: answer.validation_errors ?? ([] as ValidationIssue[]),
      });
    default:
      throw new Error(`unexpected intake outcome for an approval link: ${answer.outcome}`);
  }
}

/** Browsers send textarea line breaks as CRLF; blank means no comment. */
function normaliseComment(raw: string | undefined): string | undefined {
  const text = (raw ?? "").replace(/\r\n?/g, "\n").trim();
  if (!isStorable(text)) {
    throw new LinkError("bad_comment", 400, "The comment cannot be stored", "It contains a NUL character or a broken surrogate pair. The link was not used.");
  }
  if (text.length > MAX_COMMENT_CHARS) {
    throw new LinkError("bad_comment", 400, "The comment is too long", `A comment may have at most ${MAX_COMMENT_CHARS} characters; this one has ${text.length}. The link was not used.`);
  }
  return text.length > 0 ? text : undefined;
}
