/**
 * The delivery and timer engine's phases of `npm run bench` (issue 13): a burst of signals from
 * 16 senders (callback p99 after each 202), and isolation (500 waits calling back to an endpoint
 * that never answers, while a healthy endpoint gets 50 callbacks/s and timeouts fall due).
 */
import net, { type AddressInfo } from "node:net";
import postgres from "postgres";
import { closedLoop, openLoop } from "./load.ts";
import type { CallbackReceiver } from "./receiver.ts";
import { now, summarize, type Summary } from "./stats.ts";

export interface EngineBenchDeps {
  url: string;
  receiver: CallbackReceiver;
  log(msg: string): void;
  guard<T>(p: Promise<T>): Promise<T>;
  openWait(run: string, body: Record<string, unknown>): Promise<string>;
  sendSignal(run: string, payload: unknown): Promise<string>;
  concurrency: number;
}

export interface BurstResult {
  signals: number;
  sendRate: number;
  /** 202 → callback at the receiver. */
  latency: Summary;
  missing: number;
}

/** The burst's `count` waits, each with a callback: opened before the burst is measured (its CPU is not the burst's). */
export async function openBurstWaits(d: EngineBenchDeps, count: number): Promise<string[]> {
  const runs = Array.from({ length: count }, (_, i) => `burst-${i}`);
  d.log(`signal burst: opening ${count} waits with callback_url`);
  const opened = await d.guard(closedLoop({ concurrency: d.concurrency, durationMs: Infinity, limit: count, op: (i) => d.openWait(runs[i]!, { callback_url: d.receiver.url }).then(() => {}) }));
  if (opened.failed > 0) throw new Error(`signal burst: ${opened.failed} waits failed to open`);
  return runs;
}

/** One signal to each of the runs' waits (openBurstWaits) as fast as `senders` connections can. */
export async function signalBurst(d: EngineBenchDeps, runs: string[], senders: number): Promise<BurstResult> {
  const count = runs.length;
  d.log(`signal burst: ${count} signals from ${senders} senders`);
  const acks = new Map<string, number>();
  const sent = await d.guard(
    closedLoop({
      concurrency: senders,
      durationMs: Infinity,
      limit: count,
      op: async (i) => {
        const id = await d.sendSignal(runs[i]!, { i });
        acks.set(id, now());
      },
    }),
  );
  const missing = await d.guard(d.receiver.waitFor(acks.keys(), 60_000, (m) => d.log(`  waiting for callbacks: ${m} to go`)));
  const latency = summarize([...acks].map(([id, at]) => (d.receiver.arrivals.get(id)?.at ?? Infinity) - at));
  return { signals: acks.size, sendRate: sent.ok / (sent.elapsedMs / 1000), latency, missing };
}

export interface IsolationResult {
  hungWaits: number;
  healthyRate: number;
  /** 202 → callback at the healthy receiver. */
  healthy: Summary;
  healthyMissing: number;
  /** resolved_at − timeout_at of the waits that fell due meanwhile. */
  timeoutLag: Summary;
  timeouts: number;
  timeoutsFired: number;
  hungMaxInFlight: number;
}

/**
 * 500 waits call back to an endpoint that takes every request and never answers; meanwhile a
 * healthy endpoint gets `healthyRate` callbacks/s for `seconds`, and `timeouts` waits (with
 * callbacks to the healthy endpoint) fall due in the middle of it.
 */
export async function isolation(d: EngineBenchDeps, opts: { hungWaits: number; healthyRate: number; seconds: number; timeouts: number }): Promise<IsolationResult> {
  let inFlight = 0;
  let maxInFlight = 0;
  const sockets = new Set<net.Socket>();
  const hung = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("data", (chunk: Buffer) => {
      // Count requests by their heads; answer none.
      let at = chunk.indexOf("POST ");
      while (at >= 0) {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        at = chunk.indexOf("POST ", at + 5);
      }
    });
    socket.on("error", () => {});
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((r) => hung.listen(0, "127.0.0.1", r));
  const hungUrl = `http://127.0.0.1:${(hung.address() as AddressInfo).port}/resume`;
  try {
    const n = Math.round(opts.healthyRate * opts.seconds);
    d.log(`isolation: opening ${opts.hungWaits} waits calling back to a hung endpoint, ${n} to a healthy one, ${opts.timeouts} timing out mid-phase`);
    const hungRuns = Array.from({ length: opts.hungWaits }, (_, i) => `hung-${i}`);
    const okRuns = Array.from({ length: n }, (_, i) => `ok-${i}`);
    const open = (runs: string[], body: Record<string, unknown>) =>
      d.guard(closedLoop({ concurrency: d.concurrency, durationMs: Infinity, limit: runs.length, op: (i) => d.openWait(runs[i]!, body).then(() => {}) }));
    await open(hungRuns, { callback_url: hungUrl });
    await open(okRuns, { callback_url: d.receiver.url });
    const dueAt = new Date(Math.ceil((Date.now() + 8_000 + (opts.seconds * 1000) / 2) / 1000) * 1000);
    const timerRuns = Array.from({ length: opts.timeouts }, (_, i) => `iso-t-${i}`);
    await open(timerRuns, { timeout_at: dueAt.toISOString(), callback_url: d.receiver.url });

    d.log(`isolation: signalling the ${opts.hungWaits} hung-endpoint waits, then ${opts.healthyRate} healthy signals/s for ${opts.seconds} s`);
    await d.guard(closedLoop({ concurrency: d.concurrency, durationMs: Infinity, limit: hungRuns.length, op: (i) => d.sendSignal(hungRuns[i]!, {}).then(() => {}) }));
    const acks = new Map<string, number>();
    const lead = dueAt.getTime() - Date.now() - (opts.seconds * 1000) / 2;
    if (lead > 0) await new Promise((r) => setTimeout(r, lead)); // the deadline falls mid-phase
    await d.guard(
      openLoop({
        ratePerS: opts.healthyRate,
        count: n,
        op: async (i) => {
          const id = await d.sendSignal(okRuns[i]!, { i });
          acks.set(id, now());
        },
      }),
    );
    const healthyMissing = await d.guard(d.receiver.waitFor(acks.keys(), 30_000));
    const healthy = summarize([...acks].map(([id, at]) => (d.receiver.arrivals.get(id)?.at ?? Infinity) - at));
    const c = postgres(d.url, { max: 1, onnotice: () => {} });
    try {
      const rows = await c<{ lag_ms: number | null }[]>`
        select case when status = 'timed_out' then (extract(epoch from resolved_at - timeout_at) * 1000)::float8 end as lag_ms
        from signalbox.waits where run_id like 'iso-t-%'`;
      const fired = rows.filter((r) => r.lag_ms !== null);
      return {
        hungWaits: opts.hungWaits,
        healthyRate: opts.healthyRate,
        healthy,
        healthyMissing,
        timeoutLag: summarize(fired.map((r) => r.lag_ms!)),
        timeouts: rows.length,
        timeoutsFired: fired.length,
        hungMaxInFlight: maxInFlight,
      };
    } finally {
      await c.end({ timeout: 5 });
    }
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => hung.close(() => r()));
  }
}
