import type { ServiceProcess as Service } from "../../helpers/service-process.ts";
import { waitFor } from "../../helpers/wait-for.ts";

/** One answered (or not) request of the load. */
export interface Sample {
  kind: "open" | "signal" | "poll";
  at: number;
  ms: number;
  /** HTTP status, or "hang" (no answer within the limit), or "error" (connection failed). */
  status: number | "hang" | "error";
  retryAfter: string | null;
  contentType: string | null;
  /** How long the request was allowed to hold on purpose (long-polls). */
  heldMs: number;
}

const HANG_MS = 2_000;
const POLL_WAIT_S = 1;

/**
 * Waits and signals at `ratePerS` requests a second (at most `concurrency` in flight): opens
 * waits (with callbacks; some time out after 1 s), signals open ones, long-polls them. Records
 * every answer, and every signal that got 202 (which must be in the database afterwards).
 */
export class Load {
  readonly samples: Sample[] = [];
  readonly accepted = new Map<string, string>(); // signal_id -> run
  readonly waits: Array<{ id: string; run: string }> = [];
  #running = false;
  #inFlight = 0;
  #n = 0;
  #done: Promise<void> | undefined;

  private readonly svc: Service;
  private readonly callbackUrl: string;
  private readonly opts: { ratePerS: number; concurrency: number; prefix: string };

  constructor(svc: Service, callbackUrl: string, opts: { ratePerS: number; concurrency: number; prefix: string }) {
    this.svc = svc;
    this.callbackUrl = callbackUrl;
    this.opts = opts;
  }

  start(): void {
    this.#running = true;
    this.#done = this.#loop();
  }

  async stop(): Promise<void> {
    this.#running = false;
    await this.#done;
    // Every request ends within its own abort timeout, so this ends too.
    await waitFor("the load's requests in flight to end", () => this.#inFlight, { until: (n) => n === 0, timeoutMs: 60_000 });
  }

  async #loop(): Promise<void> {
    const interval = 1000 / this.opts.ratePerS;
    let next = performance.now();
    while (this.#running) {
      if (this.#inFlight < this.opts.concurrency) void this.#one();
      next += interval;
      const wait = next - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      else next = performance.now();
    }
  }

  async #one(): Promise<void> {
    this.#inFlight++;
    try {
      const n = this.#n++;
      const open = this.waits.filter((w) => w.id);
      if (n % 5 < 2 || open.length < 5) await this.#openWait(n);
      else if (n % 5 < 4) await this.#signal(open[Math.floor(Math.random() * open.length)]!, n);
      else await this.#poll(open[Math.floor(Math.random() * open.length)]!);
    } finally {
      this.#inFlight--;
    }
  }

  async #request(kind: Sample["kind"], path: string, init: RequestInit, heldMs = 0): Promise<Response | undefined> {
    const at = performance.now();
    const sample: Sample = { kind, at, ms: 0, status: "error", retryAfter: null, contentType: null, heldMs };
    this.samples.push(sample);
    try {
      const res = await fetch(this.svc.baseUrl + path, { ...init, signal: AbortSignal.timeout(HANG_MS + heldMs + 500) });
      const body = await res.arrayBuffer();
      sample.ms = performance.now() - at;
      sample.status = res.status;
      sample.retryAfter = res.headers.get("retry-after");
      sample.contentType = res.headers.get("content-type");
      return new Response(body, { status: res.status, headers: res.headers });
    } catch (err) {
      sample.ms = performance.now() - at;
      sample.status = (err as Error).name === "TimeoutError" ? "hang" : "error";
      return undefined;
    }
  }

  async #openWait(n: number): Promise<void> {
    const run = `${this.opts.prefix}-${n}`;
    // Every third wait times out after a second (a timeout job); the others wait for a signal.
    const body = { signal: "load", callback_url: this.callbackUrl, ...(n % 3 === 0 ? { timeout_s: 1 } : {}) };
    const res = await this.#request("open", `/runs/${run}/waits`, { method: "POST", headers: management, body: JSON.stringify(body) });
    if (res?.status === 201) this.waits.push({ id: ((await res.json()) as { id: string }).id, run });
  }

  async #signal(wait: { run: string }, n: number): Promise<void> {
    const res = await this.#request("signal", `/signals/${wait.run}/load`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ n }) });
    if (res?.status === 202) this.accepted.set(((await res.json()) as { signal_id: string }).signal_id, wait.run);
  }

  async #poll(wait: { id: string }): Promise<void> {
    await this.#request("poll", `/waits/${wait.id}?wait_s=${POLL_WAIT_S}`, { headers: management }, POLL_WAIT_S * 1000);
  }
}

let management: Record<string, string> = {};
export function useManagementKey(key: string): void {
  management = { authorization: `Bearer ${key}`, "content-type": "application/json" };
}

/** What went wrong among `samples`: anything but 2xx/4xx or a quick 503 with Retry-After. */
export function badSamples(samples: Sample[]): Sample[] {
  return samples.filter((s) => {
    if (s.status === "hang" || s.status === "error") return true;
    if (s.ms > HANG_MS + s.heldMs) return true;
    if (s.status === 503) return !s.retryAfter || !s.contentType?.startsWith("application/problem+json");
    return s.status >= 500;
  });
}
