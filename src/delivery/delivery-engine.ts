import { addJobs, jobKeys } from "../jobs/enqueue.ts";
import { findWaitsWithEvents } from "../waits/waits.queries.ts";
import { owedCallback, recordAttempts, reportRecorded, type DeliveryDeps, type OwedCallback } from "./deliver-callback.ts";
import { EndpointGate } from "./endpoint-gate.ts";
import { ATTEMPT_TIMEOUT_MS, postSigned, type AttemptResult } from "./post-signed.ts";

/**
 * How long a delivery job waits on one request before it lets go of it: the request goes on
 * in the background, and a job due after the request's time limit (the same key as a retry)
 * keeps the delivery owed if this process dies meanwhile. A hung endpoint so holds no job slot
 * beyond this, and the callbacks and timeouts behind it go on.
 */
const HAND_OFF_MS = 1_000;

export interface DeliveryEngineOptions {
  /** Requests in flight to one endpoint (host[:port]) at most. */
  perEndpoint: number;
  /** Failed attempts in a row after which an endpoint is backed off as a whole. */
  failuresToBackOff: number;
}

/**
 * Delivers callbacks in batches, per endpoint (the worker's delivery jobs call `deliver`):
 * one read for the batch, sends through the endpoint gate (a cap per endpoint, and an endpoint
 * that keeps failing backed off as a whole), and one statement recording what the batch's sends
 * answered. A callback turned away is never dropped: it is recorded as a failed attempt (its
 * endpoint is backed off; the wait's deliveries say so) or scheduled again (its endpoint is busy
 * and not answering), in the job's own time.
 */
export class DeliveryEngine {
  readonly #deps: DeliveryDeps;
  readonly gate: EndpointGate;
  /** Requests handed off (still in flight after HAND_OFF_MS): aborted when the worker stops. */
  readonly #background = new Set<Promise<unknown>>();
  readonly #stopped = new AbortController();

  constructor(deps: DeliveryDeps, opts: DeliveryEngineOptions) {
    this.#deps = deps;
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

  /** Delivers the callbacks these waits owe now (the rest are skipped); resolves once each is recorded or scheduled again. */
  async deliver(waitIds: string[], abort?: AbortSignal): Promise<void> {
    const ids = [...new Set(waitIds)];
    const owed = (await findWaitsWithEvents(this.#deps.db, ids)).map(owedCallback).filter((o): o is OwedCallback => o !== undefined);
    const later: Array<{ owed: OwedCallback; inS: number }> = [];
    const recordNow: Array<{ owed: OwedCallback; attempt: AttemptResult }> = [];
    await Promise.all(owed.map((o) => this.#one(o, later, recordNow, abort)));
    await this.#record(recordNow);
    if (later.length > 0) {
      await addJobs(
        this.#deps.db,
        later.map((l) => ({ task: "deliver_callback", payload: { id: l.owed.waitId }, inS: l.inS, jobKey: jobKeys.deliver(l.owed.waitId) })),
      );
    }
  }

  /** Stops the requests handed off: the jobs that keep their deliveries owed send them again. */
  async stop(): Promise<void> {
    this.#stopped.abort();
    await Promise.allSettled([...this.#background]);
  }

  async #one(owed: OwedCallback, later: Array<{ owed: OwedCallback; inS: number }>, recordNow: Array<{ owed: OwedCallback; attempt: AttemptResult }>, abort?: AbortSignal) {
    const a = await this.gate.admit(owed.host);
    if (a.kind === "backed_off") {
      // Not sent: the endpoint is backed off. Recorded as a failed attempt (retried with the
      // wait's own backoff, given up after its round's attempts), so the wait's deliveries show it.
      this.#deps.metrics?.deliveriesDeferred.inc({ reason: "endpoint_backed_off" });
      const error = `not sent: endpoint backed off after ${a.failures} failed attempts in a row, until ${new Date(a.untilMs).toISOString()}`;
      recordNow.push({ owed, attempt: { verdict: "retry", error, seconds: 0 } });
      return;
    }
    if (a.kind === "busy") {
      this.#deps.metrics?.deliveriesDeferred.inc({ reason: "endpoint_busy" });
      later.push({ owed, inS: a.retryInMs / 1000 });
      return;
    }
    const signal = abort ? AbortSignal.any([abort, this.#stopped.signal]) : this.#stopped.signal;
    const started = Date.now();
    this.#deps.metrics?.deliveriesInFlight.inc();
    const sent = postSigned(owed.url, owed.webhookId, owed.body, this.#deps.secrets.callbackSecret, signal).then((attempt) => {
      this.#deps.metrics?.deliveriesInFlight.dec();
      a.release(attempt.verdict === "retry");
      return attempt;
    });
    let timer: NodeJS.Timeout | undefined;
    const first = await Promise.race([sent, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), HAND_OFF_MS)))]).finally(() => clearTimeout(timer));
    if (first) {
      recordNow.push({ owed, attempt: first });
      return;
    }
    // Slow: the job lets go of it. A job due after the request's time limit keeps it owed.
    this.#deps.metrics?.deliveriesDeferred.inc({ reason: "slow_endpoint" });
    later.push({ owed, inS: (ATTEMPT_TIMEOUT_MS - (Date.now() - started)) / 1000 + 2 });
    const background = sent
      .then(async (attempt) => {
        if (this.#stopped.signal.aborted) return; // stopping: the scheduled job sends it again
        await this.#record([{ owed, attempt }]);
      })
      .catch((err: unknown) => this.#deps.log.warn({ err, waitId: owed.waitId }, "recording a callback attempt failed; its job sends it again"))
      .finally(() => this.#background.delete(background));
    this.#background.add(background);
  }

  async #record(items: Array<{ owed: OwedCallback; attempt: AttemptResult }>) {
    if (items.length === 0) return;
    const recorded = await recordAttempts(this.#deps, items);
    items.forEach((item, i) => reportRecorded(this.#deps, item.owed, item.attempt, recorded[i]));
  }
}
