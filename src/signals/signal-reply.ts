import type { Deps } from "../deps.ts";
import { NotFoundError } from "../core/errors.ts";
import type { ChangeFeed, Topic } from "../events/change-feed.ts";
import { toSignalResource } from "./list-signals.ts";
import { findSignalWithReply, type ReplyProgress, type SignalWithReply } from "./signals.queries.ts";

/** Longest a request may be held for a reply (`wait_s`), as long-polls of a wait. */
export const MAX_REPLY_WAIT_S = 60;
/**
 * A held request reads again this often even without a wake-up: the NOTIFY of a settled
 * delivery (db/functions/record_delivery_attempt.sql) normally wakes it at once; a lost one costs
 * at most this.
 */
const REPLY_POLL_MS = 1000;

/** Where a signal's reply stands, as intake and GET /signals/{id} answer it. */
export interface ReplyState {
  /** The resume callback's reply (its JSON answer): null until known, and when it had none. */
  reply: unknown;
  /** True while a reply may still come: a callback is owed, or a buffered signal awaits its wait. */
  reply_pending: boolean;
  /** The delivery status of the wait the signal resolved; null while no wait has taken it, or the wait that counted it is open. */
  delivery_status: ReplyProgress["deliveryStatus"];
}

/** Whether the reply is known (the callback was delivered): intake then answers 200. */
export const replyKnown = (s: Pick<SignalWithReply, "progress">): boolean => s.progress.repliedAt !== null || s.progress.deliveryStatus === "delivered";

/**
 * Known once the callback was delivered (replied_at; `delivered` alone for callbacks delivered
 * before replies were recorded). None will come when the wait has no callback (`none`), its
 * delivery failed (until a redelivery), the signal was never kept for a wait (rejected,
 * expired), or its run can no longer open one (cancelled, continued). Pending otherwise: a
 * callback owed (now, or once the open wait that counted it resolves), or a buffered signal no
 * wait has taken yet.
 */
export function replyState(s: Pick<SignalWithReply, "outcome" | "reply" | "progress">): ReplyState {
  const { deliveryStatus, owedOnResolve, runActive } = s.progress;
  if (replyKnown(s)) return { reply: s.reply ?? null, reply_pending: false, delivery_status: deliveryStatus };
  const kept = deliveryStatus === null && !owedOnResolve && runActive && (s.outcome === "buffered" || s.outcome === "started");
  const pending = deliveryStatus === "pending" || owedOnResolve || kept;
  return { reply: null, reply_pending: pending, delivery_status: deliveryStatus };
}

type ReplyDeps = Pick<Deps, "db"> & { changes: ChangeFeed };

/** Run events wake a buffered signal's watcher when a wait takes it; a settled delivery NOTIFYs its wait. */
const replyTopics = (s: SignalWithReply | undefined): Topic[] => (s === undefined ? [] : s.waitId ? [`run:${s.runId}`, `wait:${s.waitId}`] : [`run:${s.runId}`]);

/**
 * A signal with its reply; with `waitS` > 0 held until the reply is known or none will come,
 * the time passes, the client goes away or the server shuts down (`abort`), in whichever
 * process the callback is delivered (the change feed). `answerWhenFull`: past the cap on held
 * requests answer at once rather than 503 (intake: the signal is accepted already).
 */
export async function awaitReply(deps: ReplyDeps, id: string, waitS: number, abort: AbortSignal, answerWhenFull = false): Promise<SignalWithReply> {
  const read = async () => {
    const s = await findSignalWithReply(deps.db, id);
    if (!s) throw new NotFoundError(`no signal with id '${id}'`);
    return s;
  };
  if (waitS <= 0) return read();
  const waitMs = Math.min(waitS, MAX_REPLY_WAIT_S) * 1000;
  return deps.changes.hold(replyTopics, waitMs, abort, read, (s) => !replyState(s).reply_pending, { pollMs: REPLY_POLL_MS, answerWhenFull });
}

/** GET /signals/{id}: the signal record (as GET /signals lists it) with where its reply stands. */
export async function getSignal(deps: ReplyDeps, id: string, waitS: number, abort: AbortSignal) {
  const s = await awaitReply(deps, id, waitS, abort);
  return { ...toSignalResource(s), ...replyState(s) };
}
