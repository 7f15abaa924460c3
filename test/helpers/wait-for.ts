export interface WaitForOptions<T> {
  /** How long before giving up (default 10 s). */
  timeoutMs?: number;
  /** Pause between two probes (default 20 ms). */
  intervalMs?: number;
  /** When the value is what was awaited; default: any value that is truthy. */
  until?: (value: T) => boolean;
  /** Ends the wait at once, with this reason in the error, when what is awaited can no longer come (a process exited). */
  gaveUp?: () => string | undefined;
  /** Appended to the failure message (a process's output, the jobs left). */
  context?: () => string | Promise<string>;
}

/**
 * The one way a test waits for something to have happened: probes until the value is what was
 * awaited and returns it. The failure names what was awaited and the last value seen, so a
 * timed-out test says what did not happen instead of only that it was slow. A probe that throws
 * fails the wait: catch inside the probe what is expected on the way (a refused connection).
 */
export async function waitFor<T>(what: string, probe: () => T | Promise<T>, opts: WaitForOptions<T> = {}): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const done = opts.until ?? ((value: T) => Boolean(value));
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (done(value)) return value;
    const gaveUp = opts.gaveUp?.();
    if (gaveUp !== undefined || performance.now() > deadline) {
      const why = gaveUp ?? `not within ${timeoutMs} ms`;
      const context = opts.context ? `\n${await opts.context()}` : "";
      throw new Error(`waited for ${what}: ${why}; last value: ${describe(value)}${context}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 20));
  }
}

function describe(value: unknown): string {
  try {
    const text = JSON.stringify(value) ?? String(value);
    return text.length > 2000 ? `${text.slice(0, 2000)}…` : text;
  } catch {
    return String(value);
  }
}
