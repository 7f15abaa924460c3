import { SignalboxConnectionError, SignalboxProblem } from "../problem.ts";

/**
 * What a script can rely on. Kept in the --help text and the README: changing a number breaks
 * the scripts that test it.
 */
export const EXIT = {
  /** Done. */
  ok: 0,
  /** signalbox answered with an error: not found, conflict, invalid payload, bad token, a refused signal. */
  failed: 1,
  /** The command line is wrong: unknown command or flag, missing argument, unreadable file. Nothing was sent. */
  usage: 2,
  /** signalbox could not be reached, or answered 503 (database unavailable): try again later. */
  unavailable: 3,
  /** Ctrl-C (SIGINT) stopped a command before it finished: whatever it was doing may or may not have happened. */
  interrupted: 130,
} as const;

export const EXIT_CODES_HELP = `Exit codes:
  0  done
  1  signalbox answered with an error (not found, conflict, invalid payload, bad token, refused signal)
  2  usage error: unknown command or flag, missing argument, unreadable file (nothing was sent)
  3  signalbox unreachable, or unavailable (503): try again later
  130  interrupted (Ctrl-C) before it finished; tail and start end with 0 on Ctrl-C`;

/** A mistake on the command line: reported with the command's usage, exit 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError) return EXIT.usage;
  if (err instanceof SignalboxConnectionError) return EXIT.unavailable;
  if (err instanceof SignalboxProblem) return err.status === 503 ? EXIT.unavailable : EXIT.failed;
  return EXIT.failed;
}
