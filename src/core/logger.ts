import { AsyncLocalStorage } from "node:async_hooks";
import pino, { type DestinationStream, type Logger as Pino } from "pino";
import { Logger as WorkerLogger } from "graphile-worker";

export type Log = Pino;

/** The request a log line belongs to: set by the HTTP layer, read by every logger. */
export const requestContext = new AsyncLocalStorage<{ requestId: string }>();

/** Structured JSON logs. Secrets, tokens and payloads are never passed to the logger; redact as a backstop. */
export function createLogger(level: string, destination?: DestinationStream): Log {
  const options: pino.LoggerOptions = {
    level,
    base: { service: "signalbox" },
    // Every line written while handling a request carries its id, whichever module logs it.
    mixin: () => {
      const ctx = requestContext.getStore();
      return ctx ? { requestId: ctx.requestId } : {};
    },
    redact: { paths: ["*.authorization", "*.secret", "*.secrets", "*.password", "*.payload"], censor: "[redacted]" },
  };
  // A destination (tests capture the log lines) or stdout.
  return destination ? pino(options, destination) : pino(options);
}

/** graphile-worker's logger, routed into ours; `observe` also hears each line (some failures are told only there). */
export function workerLogger(log: Log, observe?: (level: string, message: string) => void): WorkerLogger {
  return new WorkerLogger((scope) => (level, message, meta) => {
    observe?.(level, message);
    const fields = { scope: { label: scope.label, taskIdentifier: scope.taskIdentifier, jobId: scope.jobId }, ...meta };
    // The sweep runs every few seconds: its routine completions are debug, not info.
    const routine = level === "info" && message.startsWith("Completed task ") && message.includes(" (sweep, ");
    const method = level === "error" ? "error" : level === "warning" ? "warn" : level === "info" && !routine ? "info" : "debug";
    log[method](fields, message);
  });
}

/**
 * At most `perS` lines a second of one kind (a flood must not become a flood of log lines);
 * the lines held back are counted and said in one line when the next second's first comes.
 */
export function logBudget(perS: number, now: () => number = Date.now) {
  let second = -1;
  let written = 0;
  let held = 0;
  /** Whether a line may be written now; `onHeld` hears how many were held back in an earlier second. */
  return function mayLog(onHeld: (count: number) => void): boolean {
    const current = Math.floor(now() / 1000);
    if (current !== second) {
      if (held > 0) onHeld(held);
      second = current;
      written = 0;
      held = 0;
    }
    if (written < perS) {
      written++;
      return true;
    }
    held++;
    return false;
  };
}
