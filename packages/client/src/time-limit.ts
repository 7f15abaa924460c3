/**
 * Why a request was aborted by one of the client's own time limits (not the caller's signal):
 * a server that accepted the connection and then froze (SIGSTOP, a hung VM, a dropped NAT entry)
 * would otherwise be waited on for good. Such a request is a `SignalboxConnectionError`.
 */
export class NoAnswerInTime extends Error {
  override readonly name = "NoAnswerInTime";
  constructor(ms: number) {
    super(`no answer within ${Math.round(ms)} ms`);
  }
}

/**
 * A signal for one request: aborted when the caller's `signal` is (with its reason), or after
 * `ms` with a `NoAnswerInTime`. `clear()` once the time limit no longer applies (the answer, or
 * its headers for a stream, has come), so it cannot cut what follows.
 */
export function timeLimit(ms: number, signal?: AbortSignal): { signal: AbortSignal; clear(): void } {
  const limit = new AbortController();
  const timer = setTimeout(() => limit.abort(new NoAnswerInTime(ms)), ms);
  return { signal: signal ? AbortSignal.any([signal, limit.signal]) : limit.signal, clear: () => clearTimeout(timer) };
}
