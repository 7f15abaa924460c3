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

/** graphile-worker's logger, routed into ours. */
export function workerLogger(log: Log): WorkerLogger {
  return new WorkerLogger((scope) => (level, message, meta) => {
    const fields = { scope: { label: scope.label, taskIdentifier: scope.taskIdentifier, jobId: scope.jobId }, ...meta };
    // The sweep runs every few seconds: its routine completions are debug, not info.
    const routine = level === "info" && message.startsWith("Completed task ") && message.includes(" (sweep, ");
    const method = level === "error" ? "error" : level === "warning" ? "warn" : level === "info" && !routine ? "info" : "debug";
    log[method](fields, message);
  });
}
