import { coarseDelay } from "../core/coarse-delay.ts";
import type { CallbackHandOff, CallbackJob } from "../jobs/callback-hand-off.ts";
import { addJobs, completeHandedOff, jobKeys, type JobSpec, type TaskName } from "../jobs/enqueue.ts";
import { GroupCall } from "../db/group-call.ts";
import { findWaitsWithEvents, waitWithEventFromJson, type WaitWithEvent, type WaitWithEventJson } from "../waits/waits.queries.ts";
import { owedCallback, recordAttempts, reportRecorded, type DeliveryDeps, type OwedCallback, type Recorded } from "./deliver-callback.ts";
import { EndpointGate, type Admission, type AdmitOptions } from "./endpoint-gate.ts";
import { ATTEMPT_TIMEOUT_MS, postSigned, type AttemptResult } from "./post-signed.ts";

/**
 * How long a delivery job waits on one callback before it lets go of it: the request goes on
 * in the background (queued behind its endpoint's other requests, or sent), and a job due after
 * the request's time limit keeps the delivery owed if this process dies meanwhile. A hung or
 * backlogged endpoint so holds no job slot beyond this, and the callbacks and timeouts behind it
 * go on.
 */
const LET_GO_AFTER_MS = 1_000;

/**
 * How long a callback let go of while it waits its turn at its endpoint may go on waiting: past
 * it, it is turned away (and scheduled again). The job that keeps it owed is due after this and
 * the request's time limit, so it never finds it still waiting here, or in flight.
 */
const QUEUE_HOLD_MS = 30_000;
/** When the job that keeps a callback let go of while queued is due: after its most wait and its time limit. */
const QUEUED_DUE_MS = QUEUE_HOLD_MS + ATTEMPT_TIMEOUT_MS + 2_000;

/**
 * A callback a batch job names at the attempt it was owed at (the delivery engine's own batch
 * jobs: src/worker/tasks.ts): owed by that job only while the wait's delivery is still there. A
 * retry or a redelivery since has a job of its own, which must not be run early.
 */
export interface CallbackAtAttempt {
  id: string;
  attempts: number;
  round: number;
}

/** A callback this job does not settle: it is owed again `inS` from now. */
interface Later {
  owed: OwedCallback;
  inS: number;
  /**
   * sent: let go of once sent (its answer may still come); queued: let go of while it waits
   * its turn at the endpoint (or found under way here for another job); unsent: not sent (its
   * endpoint stuck, or the job stopping).
   */
  state: "sent" | "queued" | "unsent";
}

/**
 * The jobs that keep the callbacks a job did not settle owed. One sent and let go of gets a job
 * of its own (the wait's key), due after its request's limit. The rest go together, as
 * enqueue_callbacks queues them, in batch jobs: those not sent due when the soonest of them may
 * go (thousands owed to one slow endpoint are a few jobs coming back, not thousands), those
 * still queued here due after the last of them has had its turn and its time limit (it only
 * finds them owed if this process died meanwhile, or their endpoint got stuck).
 */
function deferredJobs(later: Later[]): JobSpec[] {
  const jobs: JobSpec[] = later.filter((l) => l.state === "sent").map((l) => ({ task: "deliver_callback", payload: { id: l.owed.waitId }, inS: l.inS, jobKey: jobKeys.deliver(l.owed.waitId) }));
  const unsent = later.filter((l) => l.state === "unsent");
  if (unsent.length > 0) jobs.push(...batchJobs(unsent, Math.min(...unsent.map((l) => l.inS))));
  const queued = later.filter((l) => l.state === "queued");
  if (queued.length > 0) jobs.push(...batchJobs(queued, Math.max(...queued.map((l) => l.inS))));
  return jobs;
}

/** Batch jobs of at most 100 callbacks, as enqueue_callbacks makes them, each named at its attempt. */
function batchJobs(items: Later[], inS: number): JobSpec[] {
  const jobs: JobSpec[] = [];
  for (let i = 0; i < items.length; i += 100) {
    const payload: CallbackAtAttempt[] = items.slice(i, i + 100).map(({ owed }) => ({ id: owed.waitId, attempts: owed.attemptsBefore, round: owed.roundBefore }));
    jobs.push({ task: "deliver_callback", payload, inS });
  }
  return jobs;
}

/**
 * How long a worker leaves a callback job handed off to this process (CallbackHandOff) before
 * running it itself: should this process die first, its callbacks go this much later.
 */
const HANDED_OFF_DUE_S = 10;
/**
 * Callbacks handed off whose job has not settled them yet (recorded, or let go of to a job of
 * their own), at most: past it, intake leaves its callbacks' jobs to the workers.
 */
const HAND_OFF_ROOM = 2_000;

/** How long an attempt recorded here is still taken as under way (#settled). */
const RECORDED_KEPT_MS = 5_000;

/** An attempt's place in its wait's deliveries: its round, and the attempts recorded before it. */
const underwayKey = (owed: OwedCallback) => `${owed.roundBefore}/${owed.attemptsBefore}`;

/** An attempt's answer (or refusal), to record. */
type AttemptToRecord = { owed: OwedCallback; attempt: AttemptResult; completesJob?: string };

/**
 * What one delivery job gathers while its callbacks go out: those owed again later (the jobs it
 * queues), the attempts it records itself, its requests' abort signal, and a promise settled once
 * its later jobs are queued (a let-go callback is recorded in the background only after that).
 */
interface JobRun {
  later: Later[];
  recordNow: AttemptToRecord[];
  signal: AbortSignal;
  laterQueued: Promise<void>;
}

/** What became of a callback at the endpoint gate: turned away, or sent and answered. */
type Tried = Exclude<Admission, { kind: "send" }> | { kind: "answered"; attempt: AttemptResult };

/** Reads and completions in flight at once, and the callbacks one of them takes at most. */
const GROUPS = { slots: 2, maxItems: 500 };
/**
 * Records one at a time: those that come while one is in flight go together in the next. A
 * burst's callbacks are answered one by one (most were let go of while queued at their
 * endpoint), and each statement costs Postgres a share of its own besides its attempts: with two
 * in flight, a timer burst recorded about 20 a statement. Three alternating pairs of timer
 * bursts, one slot against two: Postgres's CPU a timeout 0.26-0.31 ms against 0.31-0.35,
 * callbacks/s 2,249-2,931 against 2,025-2,450, callback p99 3.75-4.76 s against 4.32-5.23.
 * What waits is the record (a reply's wake-up), never the callback.
 */
const RECORDS = { slots: 1, maxItems: 500 };

/**
 * A request other than a callback batch (a notification, a sensor poll), sent through the
 * endpoint gate on its job's time (`DeliveryEngine.sendOne`).
 */
export interface OutboundRequest<T> {
  /** host[:port] of the endpoint: the gate's unit. */
  host: string;
  /** The running job's task, id and key: a job like it keeps the request owed when it is turned away or let go. */
  job: { task: TaskName; id: string; jobKey: string };
  /** The request's own time limit (the job let go of it is due after it). */
  limitMs: number;
  send(signal: AbortSignal): Promise<T>;
  /** Whether the answer is a failure of the endpoint (no answer, 5xx, 408, 429): the gate counts them. */
  failed(answer: T): boolean;
  /**
   * Whether the job's abort (its runner stopping) ended the request: the endpoint said nothing,
   * so it is neither settled nor counted by the gate, and a job like the running one sends it
   * again in a moment, as a callback is.
   */
  abandoned(answer: T): boolean;
  /** Acts on the answer: in the job, or in the background once the job let go of the request. */
  settle(answer: T): Promise<void>;
}

export interface DeliveryEngineOptions {
  /** Requests in flight to one endpoint (host[:port]) at most. */
  perEndpoint: number;
  /** Failed attempts in a row after which an endpoint is backed off as a whole. */
  failuresToBackOff: number;
  /** Callbacks handed off and not settled yet, at most (default HAND_OFF_ROOM). */
  handOffRoom?: number;
}

/**
 * Delivers callbacks in batches, per endpoint (the worker's delivery jobs call `deliver`):
 * one read for the batch, sends through the endpoint gate (a cap per endpoint, and an endpoint
 * that keeps failing backed off as a whole), and one statement recording what the batch's sends
 * answered. A callback turned away is never dropped: it is recorded as a failed attempt (its
 * endpoint is backed off; the wait's deliveries say so) or scheduled again (its endpoint is busy
 * and not answering), in the job's own time.
 */
export class DeliveryEngine implements CallbackHandOff {
  readonly dueInS = HANDED_OFF_DUE_S;
  readonly #deps: DeliveryDeps;
  readonly #handOffRoom: number;
  readonly gate: EndpointGate;
  /** Requests let go of (still in flight after LET_GO_AFTER_MS): aborted when the worker stops. */
  readonly #background = new Set<Promise<unknown>>();
  readonly #stopped = new AbortController();
  /**
   * The attempt (`round/attempts before`) of each wait queued at its endpoint or in flight here,
   * until it is recorded: a job that comes due for it meanwhile does not send it again. `kept`:
   * a job that keeps it owed, should this process die, is queued (the one it was let go with).
   */
  readonly #underway = new Map<string, { attempt: string; kept: boolean }>();
  /** Callbacks turned away after their jobs let go of them, to be owed again (#turnedAway). */
  #requeued: Later[] = [];
  /**
   * Reads and records shared by the jobs running at once: under load each delivery job holds a
   * few callbacks (an intake batch's), and their statements would otherwise be most of the cost.
   */
  readonly #reads: GroupCall<string, WaitWithEvent | undefined>;
  readonly #records: GroupCall<AttemptToRecord, Recorded | undefined>;
  /** Completions of the jobs handed off, shared as the records are. */
  readonly #completions: GroupCall<string, undefined>;
  /** Callbacks handed off (take) whose job has not settled them yet (#handOffRoom at most). */
  #handedOff = 0;

  constructor(deps: DeliveryDeps, opts: DeliveryEngineOptions) {
    this.#deps = deps;
    this.#handOffRoom = opts.handOffRoom ?? HAND_OFF_ROOM;
    this.#reads = new GroupCall(async (ids) => {
      const found = new Map((await findWaitsWithEvents(deps.db, [...new Set(ids)])).map((f) => [f.wait.id, f]));
      return ids.map((id) => found.get(id));
    }, GROUPS);
    this.#records = new GroupCall((items) => recordAttempts(deps, items), RECORDS);
    this.#completions = new GroupCall(async (ids) => (await completeHandedOff(deps.db, ids), ids.map(() => undefined)), GROUPS);
    const metrics = deps.metrics;
    this.gate = new EndpointGate({
      perEndpoint: opts.perEndpoint,
      failuresToBackOff: opts.failuresToBackOff,
      backoffBaseS: deps.config.SIGNALBOX_DELIVERY_BACKOFF_S,
      onBackOff: (host, failures, untilMs) => {
        metrics?.endpointBackoffs.inc();
        deps.log.warn({ callbackHost: host, failures, backedOffS: Math.round((untilMs - Date.now()) / 100) / 10 }, "callback endpoint backed off: it keeps failing");
      },
      onRecover: (host) => deps.log.info({ callbackHost: host }, "callback endpoint answers again"),
    });
    if (metrics) metrics.sources.endpointsBackedOff = () => this.gate.backedOff();
  }

  hasRoom(): boolean {
    return this.#handedOff < this.#handOffRoom && !this.#stopped.signal.aborted;
  }

  /**
   * Runs callback jobs the way a worker would, at once, then completes them (CallbackHandOff).
   * One that fails is left as it is: a worker runs it when it comes due.
   */
  take(jobs: CallbackJob[]): void {
    for (const job of jobs) {
      this.#handedOff += job.waitIds.length;
      const run = async () => {
        const found = job.read?.map((j) => waitWithEventFromJson(j as WaitWithEventJson));
        const callbacks = job.waitIds.map((id) => ({ id, attempts: 0, round: 0 })); // as the job names them (enqueue_callbacks.sql)
        if (!(await this.deliver(callbacks, undefined, { jobId: job.id, found }))) await this.#completions.call([job.id]);
      };
      this.#inBackground(
        run().finally(() => (this.#handedOff -= job.waitIds.length)),
        { handedOffJob: job.id },
        `a callback job handed off to this process failed; a worker runs it within ${HANDED_OFF_DUE_S} s`,
      );
    }
  }

  /**
   * Delivers the callbacks these waits owe now (the rest are skipped); resolves once each is
   * recorded or scheduled again. `handedOff`, the job of callbacks this process runs itself
   * (take), is completed with their records (one commit for both) when it has any: resolves true
   * when it was (#record). Its waits come `found` already (in the callbacks' order) when the
   * transaction that resolved them read them; otherwise they are read here.
   */
  async deliver(callbacks: Array<string | CallbackAtAttempt>, abort?: AbortSignal, handedOff?: { jobId: string; found?: WaitWithEvent[] }): Promise<boolean> {
    const atAttempt = new Map(callbacks.filter((c) => typeof c !== "string").map((c) => [c.id, c]));
    const stillAt = (o: OwedCallback, at = atAttempt.get(o.waitId)) => !at || (at.attempts === o.attemptsBefore && at.round === o.roundBefore);
    const found = handedOff?.found ?? (await this.#reads.call([...new Set(callbacks.map((c) => (typeof c === "string" ? c : c.id)))]));
    const owed = found.map((f) => f && owedCallback(f)).filter((o): o is OwedCallback => o !== undefined && stillAt(o));
    // One signal for the batch's requests: the job's (the worker stopping) or the engine's.
    const signal = abort ? AbortSignal.any([abort, this.#stopped.signal]) : this.#stopped.signal;
    // A callback let go of is recorded in the background only once the job that keeps it owed is
    // queued: its record's retry (same key) must replace that job, never be replaced by it.
    let laterQueued!: () => void;
    const run: JobRun = { later: [], recordNow: [], signal, laterQueued: new Promise<void>((resolve) => (laterQueued = resolve)) };
    const { later, recordNow } = run;
    // Those this job settles itself are no longer under way here once recorded (or failed).
    const settledHere: OwedCallback[] = [];
    let recorded = false;
    try {
      // All of them, even when one fails: each must say whether it is this job's to settle.
      const outcomes = await Promise.allSettled(owed.map((o) => this.#one(o, run)));
      outcomes.forEach((r, i) => r.status === "fulfilled" && r.value && settledHere.push(owed[i]!));
      const failed = outcomes.find((r) => r.status === "rejected");
      if (failed) throw failed.reason;
      // The jobs that keep what it let go of owed first: a record that fails (the job runs again)
      // must not leave them unqueued while they are still under way here.
      await addJobs(this.#deps.db, deferredJobs(later));
      for (const l of later) this.#kept(l);
      const completed = await this.#record(recordNow, handedOff?.jobId);
      recorded = true;
      return completed;
    } finally {
      laterQueued();
      const recordedHere = new Set(recorded ? recordNow.map((r) => r.owed) : []);
      for (const o of settledHere) this.#settled(o, recordedHere.has(o));
    }
  }

  /**
   * One request through the gate, as callbacks go: an endpoint backed off or stuck turns it away
   * (a job like the running one, same key, is due when the backoff ends or a little later), and a
   * request unanswered after LET_GO_AFTER_MS is let go of (a job due after its limit keeps it owed;
   * the answer, when it comes, is settled in the background). Resolves "settled" once the answer
   * was acted on in this job, "deferred" otherwise. Nothing holds a job slot for the limit.
   */
  async sendOne<T>(req: OutboundRequest<T>, abort?: AbortSignal): Promise<"settled" | "deferred"> {
    const again = (inS: number) => addJobs(this.#deps.db, [{ task: req.job.task, payload: { id: req.job.id }, inS, jobKey: req.job.jobKey }]);
    const a = await this.gate.admit(req.host);
    if (a.kind !== "send") {
      // Not sent, and not counted as an attempt: it is sent when the endpoint may answer again.
      this.#deps.metrics?.deliveriesDeferred.inc({ reason: a.kind === "busy" ? "endpoint_busy" : "endpoint_backed_off" });
      await again(a.kind === "busy" ? a.retryInMs / 1000 : Math.max(0.1, (a.untilMs - Date.now()) / 1000));
      return "deferred";
    }
    const signal = abort ? AbortSignal.any([abort, this.#stopped.signal]) : this.#stopped.signal;
    const started = Date.now();
    const sent = req.send(signal).then(
      (answer) => (a.release(req.failed(answer), req.abandoned(answer)), answer),
      (err: unknown) => {
        a.release(true);
        throw err;
      },
    );
    const first = await this.#firstOrNothing(sent);
    if (first && req.abandoned(first.answer)) {
      await again(1);
      return "deferred";
    }
    if (first) {
      await req.settle(first.answer);
      return "settled";
    }
    this.#deps.metrics?.deliveriesDeferred.inc({ reason: "slow_endpoint" });
    await again((req.limitMs - (Date.now() - started)) / 1000 + 2);
    this.#inBackground(
      sent.then(async (answer) => {
        if (!this.#stopped.signal.aborted && !req.abandoned(answer)) await req.settle(answer); // stopping: the job scheduled sends it again
      }),
      { job: req.job.jobKey },
    );
    return "deferred";
  }

  /** The answer if it comes within LET_GO_AFTER_MS (a timer shared with the requests sent about the same time). */
  async #firstOrNothing<T>(sent: Promise<T>): Promise<{ answer: T } | undefined> {
    return Promise.race([sent.then((answer) => ({ answer })), coarseDelay(LET_GO_AFTER_MS).then(() => undefined)]);
  }

  #inBackground(work: Promise<unknown>, context: Record<string, unknown>, failed = "acting on an answer that came after its job let go failed; the job due after its limit sends it again") {
    const background = work
      .catch((err: unknown) => this.#deps.log.warn({ err, ...context }, failed))
      .finally(() => this.#background.delete(background));
    this.#background.add(background);
  }

  /** Stops the requests let go of: the jobs that keep their deliveries owed send them again. */
  async stop(): Promise<void> {
    this.gate.close();
    this.#stopped.abort();
    await Promise.allSettled([...this.#background]);
  }

  /**
   * One callback, through the endpoint gate (it waits its turn while the endpoint answers) and
   * out. Resolves true when this job settles it (records it, or schedules it again), false when
   * it let go of it or another job has it under way.
   */
  async #one(owed: OwedCallback, run: JobRun): Promise<boolean> {
    const attempt = underwayKey(owed);
    // This attempt is queued or in flight here already (a job that kept it owed came due before
    // it was recorded): it is not sent twice. Once the job it was let go with is queued, nothing
    // more is queued for it (each job that kept it owed and came due meanwhile adding one more
    // would pile them up, one a round); before (its job still has it in hand, or failed before
    // queuing one), this job queues one, so that it is owed durably when this job is done.
    const underway = this.#underway.get(owed.waitId);
    if (underway?.attempt === attempt) {
      if (!underway.kept) run.later.push({ owed, inS: QUEUED_DUE_MS / 1000, state: "queued" });
      return false;
    }
    this.#underway.set(owed.waitId, { attempt, kept: false });
    try {
      return await this.#sendOrLetGo(owed, run);
    } catch (err) {
      this.#settled(owed);
      throw err;
    }
  }

  /** #one, for an attempt this job now has under way. */
  async #sendOrLetGo(owed: OwedCallback, { later, recordNow, signal, laterQueued }: JobRun): Promise<boolean> {
    const ticket: AdmitOptions = { queue: true, bytes: owed.body.length };
    const progress: { sentAt?: number } = {};
    const tried = this.#admitAndPost(owed, ticket, signal, progress);
    const first = await this.#firstOrNothing(tried);
    if (first) {
      const t = first.answer;
      if (t.kind === "backed_off") {
        // Not sent: the endpoint is backed off. Recorded as a failed attempt (retried with the
        // wait's own backoff, given up after its round's attempts), so the wait's deliveries show it.
        const error = `not sent: endpoint backed off after ${t.failures} failed attempts in a row, until ${new Date(t.untilMs).toISOString()}`;
        recordNow.push({ owed, attempt: { verdict: "retry", error, seconds: 0 } });
      } else if (t.kind === "busy") later.push({ owed, inS: t.retryInMs / 1000, state: "unsent" });
      // Abandoned (the job runner stopping): no attempt to record; it is sent again soon.
      else if (t.attempt.abandoned) later.push({ owed, inS: 1, state: "unsent" });
      else recordNow.push({ owed, attempt: t.attempt });
      return true;
    }
    // Queued behind the endpoint's other requests, or sent and not answered yet: the job lets go
    // of it. A job due after the request's time limit (and, when still queued, after the most it
    // may wait now) keeps it owed; the answer, when it comes, is recorded in the background.
    // Thousands queued in a burst share batch jobs: a job of each one's own would cost the burst
    // an insert each, and each is nearly always delivered long before it is due.
    const sent = progress.sentAt !== undefined;
    if (sent) this.#deps.metrics?.deliveriesDeferred.inc({ reason: "slow_endpoint" });
    else ticket.until = Date.now() + QUEUE_HOLD_MS;
    const dueInMs = sent ? ATTEMPT_TIMEOUT_MS - (Date.now() - progress.sentAt!) + 2_000 : QUEUED_DUE_MS;
    later.push({ owed, inS: dueInMs / 1000, state: sent ? "sent" : "queued" });
    this.#inBackground(
      tried
        .then(async (t) => {
          await laterQueued;
          if (this.#stopped.signal.aborted) return; // stopping: the job due later sends it
          if (t.kind === "answered" && !t.attempt.abandoned) {
            await this.#record([{ owed, attempt: t.attempt }]);
            return true;
          }
          // Turned away after all (its endpoint got stuck, or backed off, or it waited its most),
          // or abandoned (its job runner stopped): owed again when the endpoint may answer, not
          // only when the job that let go of it is due.
          this.#turnedAway(owed, t.kind === "busy" ? t.retryInMs : t.kind === "backed_off" ? t.untilMs - Date.now() : 1_000);
          return false;
        })
        .then(
          (recorded) => this.#settled(owed, recorded),
          (err: unknown) => {
            this.#settled(owed);
            throw err;
          },
        ),
      { waitId: owed.waitId },
    );
    return false;
  }

  /** A job that keeps this attempt owed is queued. */
  #kept(l: Later) {
    const underway = this.#underway.get(l.owed.waitId);
    if (l.state !== "unsent" && underway?.attempt === underwayKey(l.owed)) underway.kept = true;
  }

  /**
   * This process no longer has the callback's attempt under way (#underway). One that was
   * recorded stays known a few seconds more: a job that read the wait before the record
   * committed (a job that kept it owed, running meanwhile) must not send the same attempt again.
   * One not recorded (turned away, abandoned) is free to be sent again at once.
   */
  #settled(owed: OwedCallback, recorded = false) {
    const key = underwayKey(owed);
    const forget = () => this.#underway.get(owed.waitId)?.attempt === key && this.#underway.delete(owed.waitId);
    if (recorded) void coarseDelay(RECORDED_KEPT_MS).then(forget);
    else forget();
  }

  /**
   * Callbacks turned away after their jobs let go of them are owed again in one batch job per
   * turn of the event loop (thousands queued to an endpoint that got stuck are turned away
   * together), due when the soonest of them may go.
   */
  #turnedAway(owed: OwedCallback, retryInMs: number) {
    if (this.#requeued.push({ owed, inS: Math.max(0.1, retryInMs / 1000), state: "unsent" }) > 1) return;
    const nextTurn = new Promise<void>((resolve) => setImmediate(resolve));
    this.#inBackground(
      nextTurn.then(() => addJobs(this.#deps.db, deferredJobs(this.#requeued.splice(0)))),
      { requeued: "turned away" },
    );
  }

  /**
   * A callback through the endpoint gate (queued behind the endpoint's other requests while it
   * answers) and out: what the gate said, or the attempt. `progress.sentAt` is set once it is sent.
   */
  async #admitAndPost(owed: OwedCallback, ticket: AdmitOptions, signal: AbortSignal, progress: { sentAt?: number }): Promise<Tried> {
    const a = await this.gate.admit(owed.host, ticket);
    if (a.kind !== "send") {
      this.#deps.metrics?.deliveriesDeferred.inc({ reason: a.kind === "busy" ? "endpoint_busy" : "endpoint_backed_off" });
      return a;
    }
    if (signal.aborted) {
      // Its turn came after its job runner stopped: not sent, and nothing said of the endpoint.
      a.release(false, true);
      return { kind: "answered", attempt: { verdict: "retry", error: null, seconds: 0, abandoned: true } };
    }
    progress.sentAt = Date.now();
    this.#deps.metrics?.deliveriesInFlight.inc();
    const attempt = await postSigned(owed.url, owed.webhookId, owed.body, this.#deps.secrets.callbackSecret, signal, true);
    this.#deps.metrics?.deliveriesInFlight.dec();
    a.release(attempt.verdict === "retry", attempt.abandoned);
    return { kind: "answered", attempt };
  }

  /**
   * Each attempt is its own caller of the shared record: they still go in one statement, and one
   * that cannot be recorded fails alone (the job runs again for it; the rest stay recorded).
   * Those of a job handed off (`completing`) go first as one caller that completes the job too,
   * recorded with it or not at all; should that fail, each is recorded alone and the job is
   * left (completed alone once all are; otherwise a worker runs it, and skips those recorded).
   * Resolves whether the job was completed with them.
   */
  async #record(items: AttemptToRecord[], completing?: string): Promise<boolean> {
    if (completing !== undefined && items.length > 0) {
      const together = items.map((item, i) => (i === items.length - 1 ? { ...item, completesJob: completing } : item));
      const recorded = await this.#records.call(together).catch(() => undefined);
      if (recorded) {
        items.forEach((item, i) => reportRecorded(this.#deps, item.owed, item.attempt, recorded[i]));
        return true;
      }
    }
    const recorded = await Promise.allSettled(items.map((item) => this.#records.call([item])));
    items.forEach((item, i) => {
      const r = recorded[i]!;
      if (r.status === "fulfilled") reportRecorded(this.#deps, item.owed, item.attempt, r.value[0]);
    });
    const failed = recorded.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
    return false;
  }
}
