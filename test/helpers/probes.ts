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
