/**
 * Per-endpoint admission for callbacks (Svix-like handling of one endpoint as a whole): at most
 * `perEndpoint` requests in flight to one host, and a host whose attempts keep failing (no answer,
 * 5xx, 408, 429) `failuresToBackOff` times in a row is backed off: no request goes to it until
 * the backoff ends (max(1 s, base) × 2^(trips-1), at most `maxBackoffS`), then one probe at a time until
 * one is answered. An answer that is not a failure (2xx, or a 4xx that is no reason to retry)
 * makes the host healthy again.
 *
 * A request either goes now, waits for a free slot while the host answers (its requests in
 * flight are young), or is turned away (`busy`, `backed_off`) so the caller can schedule it for
 * later instead of holding a job slot for a hung endpoint, or for a slow one with thousands owed
 * to it. How long it may wait is the caller's choice (`AdmitOptions`): a job that holds its slot
 * while it waits waits its share of `stuckMs`; a caller that lets go of the wait (the delivery
 * engine's callbacks) queues as long as the host drains its queue within `maxQueueMs`.
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
  /** A host whose oldest request in flight is older than this, and none came back for as long, is stuck: turn away, do not wait. */
  stuckMs?: number;
  /** Queued admissions (`queue: true`): turned away when the host would take longer than this to reach them. */
  maxQueueMs?: number;
  /** Queued admissions waiting at most, across all hosts; one host takes half of them at most. */
  maxQueued?: number;
  /** The requests of queued admissions (their bodies, held in memory meanwhile) take this many bytes at most, across all hosts. */
  maxQueuedBytes?: number;
  now?: () => number;
  /** An endpoint was backed off (its failures in a row, until when). */
  onBackOff?(host: string, failures: number, untilMs: number): void;
  /** An endpoint answered again after it had been backed off. */
  onRecover?(host: string): void;
}

export interface AdmitOptions {
  /**
   * Queue behind the host's requests as long as it answers, rather than for a share of
   * `stuckMs`: for a caller that does not hold a job slot while it waits. A burst of thousands
   * of callbacks to one healthy endpoint then goes out in order, none of them turned away to
   * come back a second later; the queue is bounded by how fast the host drains it
   * (`maxQueueMs`, looked at again each time the waiters wake) and by `maxQueued` and
   * `maxQueuedBytes` in all.
   */
  queue?: boolean;
  /** Queued: the request's size in bytes. */
  bytes?: number;
  /** Queued: turned away if still waiting then (the gate's clock). The caller may set it while it waits. */
  until?: number;
}

/** Woken for its turn (a slot freed for it) or to look again (a timer, a backoff, the gate closing). */
type Wake = "turn" | "look";

interface HostState {
  /** Start times of the requests in flight. */
  inFlight: Set<{ at: number }>;
  /** How long its requests take to be answered (a moving average, ms): how soon a slot frees. */
  answerMs: number;
  /**
   * How many of its requests were answered lately, per ms: a count decayed over PACE_WINDOW_MS,
   * as of `paceAt`. A few answers held up for a second (by us: a collection, a saturated CPU) raise
   * answerMs for a while, and with it how long a queue of thousands looks to take; not the pace.
   */
  pace: number;
  paceAt: number;
  /**
   * When a request of it last came back (answered or failed): a host whose oldest request is
   * old while others keep coming back is slow (or we are: a burst saturating our own CPU), not
   * stuck.
   */
  cameBackAt: number;
  /** Admissions that hold a job slot while they wait: woken before the queued ones. */
  urgent: Array<(w: Wake) => void>;
  /** Queued admissions, in order. */
  queued: Array<(w: Wake) => void>;
  failures: number;
  trips: number;
  /** When the last backoff began: a request sent before it failing says nothing new. */
  trippedAt: number;
  untilMs: number;
  timer?: NodeJS.Timeout;
  timerAt?: number;
}

/** The window the pace at which a host answers is counted over (HostState.pace). */
const PACE_WINDOW_MS = 1_000;

/** Endpoints kept before the idle ones are forgotten (see #forgetIdle). */
const MAX_IDLE_HOSTS = 1_000;

export class EndpointGate {
  readonly #hosts = new Map<string, HostState>();
  readonly #opts: Required<Omit<EndpointGateOptions, "onBackOff" | "onRecover">> & Pick<EndpointGateOptions, "onBackOff" | "onRecover">;
  /** Queued admissions waiting now across all hosts, and the bytes of their requests. */
  #queued = 0;
  #queuedBytes = 0;
  #closed = false;

  constructor(opts: EndpointGateOptions) {
    this.#opts = { maxBackoffS: 60, stuckMs: 1_000, maxQueueMs: 30_000, maxQueued: 20_000, maxQueuedBytes: 256 * 2 ** 20, now: Date.now, ...opts };
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

  /** Turns away every admission waiting and every one after (the engine stopping). */
  close(): void {
    this.#closed = true;
    for (const s of this.#hosts.values()) this.#wakeAll(s);
  }

  async admit(host: string, opts: AdmitOptions = {}): Promise<Admission> {
    const since = this.#opts.now();
    const bytes = opts.queue ? (opts.bytes ?? 0) : 0;
    for (let wake: Wake | undefined; ; ) {
      const s = this.#state(host);
      const admission = this.#decide(host, s, opts, since, bytes, wake);
      if (admission.kind !== "wait") {
        // Woken for a slot it does not take: the turn goes to the next in line.
        if (admission.kind !== "send" && wake === "turn") this.#nextInLine(s);
        return admission;
      }
      if (opts.queue) {
        this.#queued++;
        this.#queuedBytes += bytes;
      }
      wake = await new Promise<Wake>((resolve) => {
        // Woken for its turn but a slot was not free after all: it keeps its place at the front.
        const line = opts.queue ? s.queued : s.urgent;
        if (wake === "turn") line.unshift(resolve);
        else line.push(resolve);
        this.#lookAgainAt(s, admission.lookAt + 1);
      });
      if (opts.queue) {
        this.#queued--;
        this.#queuedBytes -= bytes;
      }
    }
  }

  /** What an admission does now: goes, is turned away, or waits (until `lookAt` at the latest). */
  #decide(host: string, s: HostState, opts: AdmitOptions, since: number, bytes: number, wake: Wake | undefined): Admission | { kind: "wait"; lookAt: number } {
    const now = this.#opts.now();
    // Closing, or a queued admission past its caller's `until` (sent after it, its answer could
    // outlast the job that keeps it owed): turned away.
    if (this.#closed || (opts.until !== undefined && now >= opts.until)) return { kind: "busy", retryInMs: 1_000 };
    if (s.untilMs > now) return { kind: "backed_off", failures: s.failures, untilMs: s.untilMs };
    // After a backoff: one probe at a time until the endpoint answers.
    const limit = this.#limit(s);
    // First come, first served: a newcomer waits behind those already waiting.
    if (s.inFlight.size < limit && (wake !== undefined || s.urgent.length + s.queued.length === 0)) return this.#send(host, s);
    // A Set keeps insertion order: its first request is the oldest (none: the slots are
    // promised to the waiters woken for them).
    const oldest = s.inFlight.values().next().value?.at ?? now;
    const age = now - oldest;
    // Stuck: its oldest request is old and none came back since. When it will look stuck if
    // nothing comes back:
    const stuckAt = Math.max(oldest, s.cameBackAt) + this.#opts.stuckMs;
    // Stuck (or a probe is out): come back later, the longer the longer they hang.
    if (s.trips > 0 || now >= stuckAt) return { kind: "busy", retryInMs: Math.min(10_000, Math.max(1_000, 2 * age)) };
    // Answering, but more is owed to it than it answers while this may wait: come back about
    // when the ones ahead have gone (the job slot is not held for a slow endpoint's backlog).
    // A job that holds its slot waits its share of stuckMs first (within a tenth of it: those
    // turned away together, one wake-up of a queue of thousands per 100 ms rather than one per
    // waiter); a queued caller only while the queue ahead of it drains within maxQueueMs, and
    // within the gate's bounds.
    // Woken for its turn, it goes back to the front of its line; otherwise to the back.
    const ahead = s.urgent.length + (opts.queue && wake !== "turn" ? s.queued.length : 0);
    const turnAway = opts.queue
      ? this.#drainMs(s, ahead + 1) > this.#opts.maxQueueMs ||
        (wake === undefined && (this.#queued >= this.#opts.maxQueued || s.queued.length >= this.#opts.maxQueued / 2 || this.#queuedBytes + bytes > this.#opts.maxQueuedBytes))
      : now - since >= 0.9 * this.#opts.stuckMs;
    if (turnAway) return { kind: "busy", retryInMs: Math.min(30_000, Math.max(1_000, this.#drainMs(s, ahead + s.inFlight.size))) };
    // Its requests come back: a slot frees soon. Wait for one, or until they look stuck, or
    // this one has waited its share, or reached its `until`.
    return { kind: "wait", lookAt: opts.queue ? Math.min(stuckAt, opts.until ?? Infinity) : Math.min(stuckAt, since + this.#opts.stuckMs) };
  }

  #nextInLine(s: HostState) {
    (s.urgent.shift() ?? s.queued.shift())?.("turn");
  }

  #limit(s: HostState): number {
    return s.trips > 0 ? 1 : this.#opts.perEndpoint;
  }

  /**
   * How long until `ahead` requests queued at the host have gone, at the pace it answers: from
   * how long its answers take, or from how many it answered lately when that says sooner (a
   * burst's queue at a host that keeps answering thousands a second was once estimated at over
   * 30 s after a stall of ours, and a hundred callbacks were turned away for 30 s).
   */
  #drainMs(s: HostState, ahead: number): number {
    const byAnswerTime = (ahead / this.#limit(s)) * s.answerMs;
    // Counted over a second, the pace says nothing of a host whose answers take longer (they
    // come back in waves).
    const pace = s.answerMs < PACE_WINDOW_MS ? this.#paceNow(s) : 0;
    return pace > 0 ? Math.min(byAnswerTime, ahead / pace) : byAnswerTime;
  }

  /** Answers per ms lately (HostState.pace, decayed to now). */
  #paceNow(s: HostState, now = this.#opts.now()): number {
    return s.pace * Math.exp(-(now - s.paceAt) / PACE_WINDOW_MS);
  }

  /**
   * One timer per host wakes every waiter to look again once its oldest request may look stuck
   * (or the soonest waiter's share or `until` is up): thousands queued behind one endpoint in a
   * burst need no timer each.
   */
  #lookAgainAt(s: HostState, at: number) {
    if (s.timer && s.timerAt! <= at) return;
    clearTimeout(s.timer);
    s.timerAt = at;
    s.timer = setTimeout(() => {
      s.timer = undefined;
      this.#wakeAll(s);
    }, at - this.#opts.now());
  }

  #wakeAll(s: HostState) {
    for (const wake of [...s.urgent.splice(0), ...s.queued.splice(0)]) wake("look");
  }

  /** Endpoints it keeps state for (tests: it stays bounded). */
  tracked(): number {
    return this.#hosts.size;
  }

  #state(host: string): HostState {
    let s = this.#hosts.get(host);
    if (!s && this.#hosts.size >= MAX_IDLE_HOSTS) this.#forgetIdle();
    if (!s) this.#hosts.set(host, (s = { inFlight: new Set(), answerMs: 0, pace: 0, paceAt: 0, cameBackAt: 0, urgent: [], queued: [], failures: 0, trips: 0, trippedAt: 0, untilMs: 0 }));
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
        // A request we gave up on says nothing of how fast the host answers, nor that it does.
        if (!abandoned) {
          const now = this.#opts.now();
          s.answerMs = s.answerMs === 0 ? now - request.at : 0.9 * s.answerMs + 0.1 * (now - request.at);
          if (!failed) {
            s.pace = this.#paceNow(s, now) + 1 / PACE_WINDOW_MS;
            s.paceAt = now;
          }
          s.cameBackAt = now;
          if (failed) this.#failed(host, s, request.at);
          else this.#answered(host, s);
        }
        this.#nextInLine(s);
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
    this.#wakeAll(s);
  }

  /**
   * Hosts with nothing in flight are kept: those that failed (their count of failures in a row),
   * and those that answered (how fast they answer, which bounds the queue a burst to them may
   * wait in: a host forgotten while idle met every burst as unknown). Past MAX_IDLE_HOSTS, those
   * with nothing in flight, waiting or backed off are forgotten, so callbacks to ever new hosts
   * cannot grow this without bound.
   */
  #forgetIdle() {
    const now = this.#opts.now();
    for (const [host, s] of this.#hosts) if (s.inFlight.size === 0 && s.urgent.length + s.queued.length === 0 && s.untilMs <= now) this.#hosts.delete(host);
  }
}
