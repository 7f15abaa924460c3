/**
 * Per-endpoint admission for callbacks (Svix-like handling of one endpoint as a whole): at most
 * `perEndpoint` requests in flight to one host, and a host whose attempts keep failing (no answer,
 * 5xx, 408, 429) `failuresToBackOff` times in a row is backed off: no request goes to it until
 * the backoff ends (max(1 s, base) × 2^(trips-1), at most `maxBackoffS`), then one probe at a time until
 * one is answered. An answer that is not a failure (2xx, or a 4xx that is no reason to retry)
 * makes the host healthy again.
 *
 * Nothing here waits long: a request either goes now, waits briefly for a free slot while the
 * host answers (its requests in flight are young, and this one has waited less than `stuckMs`),
 * or is turned away (`busy`, `backed_off`) so the caller can schedule it for later instead of
 * holding a job slot for a hung endpoint, or for a slow one with thousands owed to it.
 */
export type Admission =
  | { kind: "send"; release(failed: boolean, abandoned?: boolean): void }
  | { kind: "backed_off"; failures: number; untilMs: number }
  | { kind: "busy"; retryInMs: number };

export interface EndpointGateOptions {
  perEndpoint: number;
  failuresToBackOff: number;
  backoffBaseS: number;
  maxBackoffS?: number;
  /** A host whose oldest request in flight is older than this, with no free slot, is stuck: turn away, do not wait. */
  stuckMs?: number;
  now?: () => number;
  /** An endpoint was backed off (its failures in a row, until when). */
  onBackOff?(host: string, failures: number, untilMs: number): void;
  /** An endpoint answered again after it had been backed off. */
  onRecover?(host: string): void;
}

interface Waiter {
  wake(): void;
}

interface HostState {
  /** Start times of the requests in flight. */
  inFlight: Set<{ at: number }>;
  /** How long its requests take to be answered (a moving average, ms): how soon a slot frees. */
  answerMs: number;
  waiters: Waiter[];
  failures: number;
  trips: number;
  /** When the last backoff began: a request sent before it failing says nothing new. */
  trippedAt: number;
  untilMs: number;
  timer?: NodeJS.Timeout;
}

/** Endpoints kept before the idle ones are forgotten (see #forgetIdle). */
const MAX_IDLE_HOSTS = 1_000;

export class EndpointGate {
  readonly #hosts = new Map<string, HostState>();
  readonly #opts: Required<Omit<EndpointGateOptions, "onBackOff" | "onRecover">> & Pick<EndpointGateOptions, "onBackOff" | "onRecover">;

  constructor(opts: EndpointGateOptions) {
    this.#opts = { maxBackoffS: 60, stuckMs: 1_000, now: Date.now, ...opts };
  }

  /** Endpoints backed off right now. */
  backedOff(): number {
    const now = this.#opts.now();
    let n = 0;
    for (const s of this.#hosts.values()) if (s.untilMs > now) n++;
    return n;
  }

  /** Whether `host` is backed off now (tests, operators). */
  isBackedOff(host: string): boolean {
    return (this.#hosts.get(host)?.untilMs ?? 0) > this.#opts.now();
  }

  async admit(host: string): Promise<Admission> {
    const since = this.#opts.now();
    for (;;) {
      const s = this.#state(host);
      const now = this.#opts.now();
      if (s.untilMs > now) return { kind: "backed_off", failures: s.failures, untilMs: s.untilMs };
      // After a backoff: one probe at a time until the endpoint answers.
      const limit = s.trips > 0 ? 1 : this.#opts.perEndpoint;
      if (s.inFlight.size < limit) return this.#send(host, s);
      // A Set keeps insertion order: its first request is the oldest.
      const age = now - s.inFlight.values().next().value!.at;
      // Stuck (or a probe is out): come back later, the longer the longer they hang.
      if (s.trips > 0 || age >= this.#opts.stuckMs) return { kind: "busy", retryInMs: Math.min(10_000, Math.max(1_000, 2 * age)) };
      // Answering, but more is owed to it than it answers while this waited: come back about when
      // the ones queued ahead have gone (the job slot is not held for a slow endpoint's backlog).
      // (Within a tenth of its time: those turned away together, one wake-up of a queue of
      // thousands per 100 ms rather than one per waiter.)
      if (now - since >= 0.9 * this.#opts.stuckMs) {
        const drainMs = ((s.waiters.length + s.inFlight.size) / limit) * s.answerMs;
        return { kind: "busy", retryInMs: Math.min(30_000, Math.max(1_000, drainMs)) };
      }
      // Its requests are young: a slot frees soon. Wait for one, or until they look stuck, or
      // this one has waited its share.
      await new Promise<void>((resolve) => {
        s.waiters.push({ wake: resolve });
        this.#wakeAllAfter(s, Math.min(this.#opts.stuckMs - age, since + this.#opts.stuckMs - now) + 1);
      });
    }
  }

  /**
   * One timer per host wakes every waiter once its oldest request may look stuck (each looks
   * again): thousands queued behind one endpoint in a burst need no timer each.
   */
  #wakeAllAfter(s: HostState, ms: number) {
    if (s.timer) return;
    s.timer = setTimeout(() => {
      s.timer = undefined;
      for (const w of s.waiters.splice(0)) w.wake();
    }, ms);
  }

  /** Endpoints it keeps state for (tests: it stays bounded). */
  tracked(): number {
    return this.#hosts.size;
  }

  #state(host: string): HostState {
    let s = this.#hosts.get(host);
    if (!s && this.#hosts.size >= MAX_IDLE_HOSTS) this.#forgetIdle();
    if (!s) this.#hosts.set(host, (s = { inFlight: new Set(), answerMs: 0, waiters: [], failures: 0, trips: 0, trippedAt: 0, untilMs: 0 }));
    return s;
  }

  #send(host: string, s: HostState): Admission {
    const request = { at: this.#opts.now() };
    s.inFlight.add(request);
    let released = false;
    return {
      kind: "send",
      // abandoned: we gave up on the request (our job runner stopping): it says nothing of the host.
      release: (failed: boolean, abandoned = false) => {
        if (released) return;
        released = true;
        s.inFlight.delete(request);
        s.answerMs = s.answerMs === 0 ? this.#opts.now() - request.at : 0.9 * s.answerMs + 0.1 * (this.#opts.now() - request.at);
        if (!abandoned && failed) this.#failed(host, s, request.at);
        else if (!abandoned) this.#answered(host, s);
        this.#wakeOne(s);
        this.#forgetIfIdle(host, s);
      },
    };
  }

  #answered(host: string, s: HostState) {
    const wasBackedOff = s.trips > 0;
    s.failures = 0;
    s.trips = 0;
    s.untilMs = 0;
    if (wasBackedOff) this.#opts.onRecover?.(host);
  }

  #failed(host: string, s: HostState, sentAt: number) {
    s.failures++;
    if (s.failures < this.#opts.failuresToBackOff) return;
    // Failures of requests sent before the backoff began neither extend it nor, once it ended
    // (a hung request fails at its 10 s limit), begin another: only a request sent since can.
    if (s.untilMs > this.#opts.now() || sentAt < s.trippedAt) return;
    s.trips++;
    s.trippedAt = this.#opts.now();
    const backoffS = Math.min(this.#opts.maxBackoffS, Math.max(1, this.#opts.backoffBaseS) * 2 ** (s.trips - 1));
    s.untilMs = this.#opts.now() + backoffS * 1000;
    this.#opts.onBackOff?.(host, s.failures, s.untilMs);
    // Whoever waits for a slot now learns it is backed off.
    for (const w of s.waiters.splice(0)) w.wake();
  }

  #wakeOne(s: HostState) {
    s.waiters.shift()?.wake();
  }

  /**
   * Hosts that failed and then got no more requests are kept (their count of failures in a row);
   * past MAX_IDLE_HOSTS, those with nothing in flight, queued or backed off are forgotten, so
   * callbacks to ever new hosts cannot grow this without bound.
   */
  #forgetIdle() {
    const now = this.#opts.now();
    for (const [host, s] of this.#hosts) if (s.inFlight.size === 0 && s.waiters.length === 0 && s.untilMs <= now) this.#hosts.delete(host);
  }

  /** A healthy host with nothing in flight needs no memory. */
  #forgetIfIdle(host: string, s: HostState) {
    if (s.inFlight.size === 0 && s.waiters.length === 0 && s.failures === 0 && s.trips === 0) this.#hosts.delete(host);
  }
}
