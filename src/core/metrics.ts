import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/**
 * The Prometheus instruments. One registry per app instance (tests build many apps); verbs
 * record through `deps.metrics` when present. Gauges that need the database are filled in
 * at scrape time by the metrics route.
 */
export function createMetrics(opts: { defaultMetrics?: boolean } = {}) {
  const registry = new Registry();
  if (opts.defaultMetrics) collectDefaultMetrics({ register: registry });
  /** Values read at scrape time from the parts that hold them (set by those parts). */
  const sources: { endpointsBackedOff?: () => number } = {};
  const m = {
    registry,
    sources,
    signals: new Counter({ name: "signalbox_signals_total", help: "Signals taken at intake, by signal type and outcome", labelNames: ["signal", "outcome"], registers: [registry] }),
    unauthenticated: new Counter({ name: "signalbox_intake_unauthenticated_total", help: "Intake requests refused for a bad or missing signature (not recorded in the signal log)", registers: [registry] }),
    waitsOpen: new Gauge({ name: "signalbox_waits_open", help: "Waits currently waiting (all processes)", registers: [registry] }),
    waitsResolved: new Gauge({
      name: "signalbox_waits_resolved",
      help: "Waits that left waiting, by outcome (received, timed_out, cancelled), counted in the database across all processes",
      labelNames: ["outcome"],
      registers: [registry],
    }),
    timeoutsFired: new Counter({ name: "signalbox_timeouts_fired_total", help: "Waits timed out (by the deadline alarm or their own timeout job)", registers: [registry] }),
    timeoutLag: new Histogram({
      name: "signalbox_timeout_lag_seconds",
      help: "When a timeout fired minus its deadline",
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
      registers: [registry],
    }),
    deliveries: new Counter({ name: "signalbox_deliveries_total", help: "Callback attempts by result (delivered, retry, failed)", labelNames: ["result"], registers: [registry] }),
    deliveryLatency: new Histogram({
      name: "signalbox_delivery_duration_seconds",
      help: "Duration of one callback attempt",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    deliveryAttempts: new Histogram({
      name: "signalbox_delivery_attempts",
      help: "Attempts a callback took to end (delivered or failed)",
      buckets: [1, 2, 3, 5, 8, 10, 20],
      registers: [registry],
    }),
    deliveriesGivenUp: new Counter({
      name: "signalbox_deliveries_given_up_total",
      help: "Callback deliveries that gave up (became failed), by reason: rejected (a 4xx other than 408/429) or attempts_exhausted (SIGNALBOX_DELIVERY_MAX_ATTEMPTS)",
      labelNames: ["reason"],
      registers: [registry],
    }),
    notificationsGivenUp: new Counter({
      name: "signalbox_notifications_given_up_total",
      help: "notify_url notifications (signal.waiting, reminders) that gave up (became failed), by reason: rejected (a 4xx other than 408/429) or attempts_exhausted",
      labelNames: ["reason"],
      registers: [registry],
    }),
    endpointsBackedOff: new Gauge({
      name: "signalbox_delivery_endpoints_backed_off",
      help: "Callback endpoints (host[:port]) this process has backed off now: they kept failing, so nothing is sent to them until their backoff ends",
      registers: [registry],
      collect() {
        this.set(sources.endpointsBackedOff?.() ?? 0);
      },
    }),
    endpointBackoffs: new Counter({
      name: "signalbox_delivery_endpoint_backoffs_total",
      help: "Times a callback endpoint was backed off as a whole after failed attempts in a row (each logs a warning naming the host)",
      registers: [registry],
    }),
    deliveriesDeferred: new Counter({
      name: "signalbox_deliveries_deferred_total",
      help: "Callbacks not sent at once, by reason: endpoint_backed_off (recorded as a failed attempt), endpoint_busy (its requests in flight hang, or more is queued to it than it answers in 30 s; scheduled again), slow_endpoint (still in flight after 1 s; the job let go of it)",
      labelNames: ["reason"],
      registers: [registry],
    }),
    deliveriesInFlight: new Gauge({ name: "signalbox_deliveries_in_flight", help: "Callback requests in flight from this process", registers: [registry] }),
    intakeBatchSize: new Histogram({
      name: "signalbox_intake_batch_size",
      help: "Signals committed together by one intake transaction (group commit; 1 when traffic is light)",
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers: [registry],
    }),
    jobQueueDepth: new Gauge({ name: "signalbox_job_queue_depth", help: "Jobs in the queue (pending, scheduled or running)", registers: [registry] }),
    httpDuration: new Histogram({
      name: "signalbox_http_request_duration_seconds",
      help: "HTTP request durations by route",
      labelNames: ["method", "route", "status"],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 60],
      registers: [registry],
    }),
  };
  return m;
}
export type Metrics = ReturnType<typeof createMetrics>;
