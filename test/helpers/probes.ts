import { Writable } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

setFlagsFromString("--expose_gc");
const gc = runInNewContext("gc") as () => void;

/** The heap in use after a full collection, in KiB: what is still referenced, not garbage. */
export function heapKiB(): number {
  gc();
  return process.memoryUsage().heapUsed / 1024;
}

/** A log destination that keeps every JSON line written to it (pass `stream` as startTestApp's logStream). */
export function logCapture<Line = Record<string, unknown>>(): { stream: Writable; lines: Line[] } {
  const lines: Line[] = [];
  const stream = new Writable({
    write(chunk, _enc, cb) {
      for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Line);
      cb();
    },
  });
  return { stream, lines };
}

/**
 * Runs `work` while asking `${baseUrl}/healthz`, one request at a time: its result, and the
 * slowest answer in ms (Infinity when one failed or took longer than `probeTimeoutMs`). A
 * request that blocks the event loop shows as a slow /healthz.
 */
export async function whileProbingHealth<T>(baseUrl: string, work: () => Promise<T>, probeTimeoutMs = 60_000): Promise<{ result: T; slowestHealthz: number }> {
  let done = false;
  let slowest = 0;
  const probing = (async () => {
    while (!done) {
      const started = Date.now();
      const ok = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(probeTimeoutMs) }).then((r) => r.ok, () => false);
      slowest = Math.max(slowest, ok ? Date.now() - started : Infinity);
      if (!ok) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  await new Promise((r) => setTimeout(r, 100)); // the probe is under way before the work starts
  try {
    return { result: await work(), slowestHealthz: (await new Promise((r) => setTimeout(r, 100)), slowest) };
  } finally {
    done = true;
    await probing;
  }
}
