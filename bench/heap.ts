/**
 * The service's live JavaScript heap, after a full garbage collection: what "memory stays flat"
 * means (RSS alone also counts what V8 and the allocator keep from earlier peaks and give back
 * when they please). The service runs with `--inspect=127.0.0.1:0` (INSPECT_FLAG); its inspector
 * is asked over the Chrome DevTools Protocol to collect garbage, then for the heap in use. The
 * inspector costs nothing while no client is attached, and this one attaches only to measure.
 */
export const INSPECT_FLAG = "--inspect=127.0.0.1:0";

/** The service's inspector address, from the line Node prints at start ("Debugger listening on ws://…"). */
export function inspectorUrl(lines: string[]): string | undefined {
  for (const line of lines) {
    const m = /Debugger listening on (ws:\/\/\S+)/.exec(line);
    if (m) return m[1];
  }
  return undefined;
}

/** Heap used (MiB) after a forced full GC, and the heap V8 holds for it. */
export async function heapAfterGc(wsUrl: string): Promise<{ usedMiB: number; totalMiB: number }> {
  const ws = new WebSocket(wsUrl);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve(), { once: true });
    ws.addEventListener("error", () => reject(new Error(`inspector at ${wsUrl}: could not connect`)), { once: true });
  });
  let nextId = 1;
  const pending = new Map<number, (result: unknown) => void>();
  ws.addEventListener("message", (e) => {
    const msg = JSON.parse(String(e.data)) as { id?: number; result?: unknown };
    if (msg.id !== undefined) pending.get(msg.id)?.(msg.result);
  });
  const call = <T>(method: string): Promise<T> =>
    new Promise<T>((resolve) => {
      const id = nextId++;
      pending.set(id, (r) => resolve(r as T));
      ws.send(JSON.stringify({ id, method }));
    });
  try {
    // Twice: objects with finalizers or weak references are freed by the second collection.
    await call("HeapProfiler.collectGarbage");
    await call("HeapProfiler.collectGarbage");
    const usage = await call<{ usedSize: number; totalSize: number }>("Runtime.getHeapUsage");
    return { usedMiB: usage.usedSize / 2 ** 20, totalMiB: usage.totalSize / 2 ** 20 };
  } finally {
    ws.close();
  }
}

/** Lines the inspector itself prints (not the service's log). */
export const isInspectorLine = (line: string): boolean => /^(Debugger listening on|For help, see:|Debugger attached\.|Debugger ending on|Waiting for the debugger)/.test(line);
