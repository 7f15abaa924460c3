import { sql } from "drizzle-orm";
import {
  type AnyPgColumn,
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgSchema,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
} from "drizzle-orm/pg-core";

/** All of signalbox's tables live in their own schema, beside graphile_worker's. */
export const signalbox = pgSchema("signalbox");

// Millisecond precision: a JS Date round-trips exactly, so keyset cursors built from Dates are exact.
const tz = (name: string) => timestamp(name, { withTimezone: true, mode: "date", precision: 3 });

export const signalTypes = signalbox.table("signal_types", {
  name: text("name").primaryKey(),
  description: text("description"),
  /** JSON Schema (2020-12) the payload must satisfy; null accepts any JSON. */
  schema: jsonb("schema"),
  /** {scheme, secrets, tolerance_s, header, run_pointer}; secrets never leave the server. */
  auth: jsonb("auth").notNull(),
  bufferTtlS: integer("buffer_ttl_s").notNull().default(0),
  responses: jsonb("responses").$type<string[] | null>(),
  /** Receives a signed `signal.waiting` event when a wait for this type opens. */
  notifyUrl: text("notify_url"),
  /** `signal.reminder` events this many seconds before a wait's deadline. */
  remindersS: jsonb("reminders_s").$type<number[]>().notNull().default([]),
  /**
   * Signal-with-start: a signal of this type for a run never seen is `started`, and a signed
   * `run.start` event is POSTed here (db/functions/start_run.sql).
   */
  startUrl: text("start_url"),
  createdAt: tz("created_at").notNull().defaultNow(),
  updatedAt: tz("updated_at").notNull().defaultNow(),
});

/** One row per run ever seen. Its row lock serialises everything that happens to that run. */
export const runs = signalbox.table(
  "runs",
  {
    runId: text("run_id").primaryKey(),
    status: text("status").notNull().default("active"),
    /** The last `sequence` handed to an accepted signal of this run (gapless, starts at 1). */
    lastSequence: bigint("last_sequence", { mode: "number" }).notNull().default(0),
    cancelReason: text("cancel_reason"),
    cancelledBy: text("cancelled_by"),
    cancelledAt: tz("cancelled_at"),
    isPaused: boolean("is_paused").notNull().default(false),
    pausedAt: tz("paused_at"),
    pauseReason: text("pause_reason"),
    pausedBy: text("paused_by"),
    /** A checkpoint has found the run paused since the last pause (records `run.paused` once). */
    pauseObserved: boolean("pause_observed").notNull().default(false),
    /** Registered parent: pause, resume and cancel reach every descendant. */
    parentRunId: text("parent_run_id"),
    createdAt: tz("created_at").notNull().defaultNow(),
    /**
     * Continue-as-new (POST /runs/{run}/continue): the run's direct successor. Set once, never
     * changed: signals and waits addressed to this run go to the newest run of the chain.
     */
    continuedAs: text("continued_as").references((): AnyPgColumn => runs.runId),
    continuedAt: tz("continued_at"),
  },
  (t) => [
    // `continued` is final, as Temporal's ContinuedAsNew: the run's work goes on in continued_as.
    check("runs_status", sql`${t.status} in ('active', 'cancelled', 'continued')`),
    check("runs_continued", sql`(${t.status} = 'continued') = (${t.continuedAs} is not null) and (${t.continuedAs} is null) = (${t.continuedAt} is null)`),
    check("runs_not_own_successor", sql`${t.continuedAs} is null or ${t.continuedAs} <> ${t.runId}`),
    // One predecessor per run: a chain is a line (continued_from is one run), found by this index.
    uniqueIndex("runs_continued_as").on(t.continuedAs).where(sql`${t.continuedAs} is not null`),
    check("runs_not_own_parent", sql`${t.parentRunId} is null or ${t.parentRunId} <> ${t.runId}`),
    index("runs_parent").on(t.parentRunId).where(sql`${t.parentRunId} is not null`),
  ],
);

export const waits = signalbox.table(
  "waits",
  {
    id: text("id").primaryKey(),
    /** Every wait belongs to a run row (the run lock inserts it first; runs are never deleted). */
    runId: text("run_id").notNull().references(() => runs.runId),
    signal: text("signal").notNull(),
    key: text("key"),
    status: text("status").notNull().default("waiting"),
    createdAt: tz("created_at").notNull().defaultNow(),
    timeoutAt: tz("timeout_at"),
    resolvedAt: tz("resolved_at"),
    metadata: jsonb("metadata").notNull().default({}),
    callbackUrl: text("callback_url"),
    /** The signal that resolved this wait (status = received). */
    signalId: text("signal_id"),
    /** The event (signal.received / timeout / cancelled) the callback carries; its id is the webhook-id. */
    resolutionEventId: bigint("resolution_event_id", { mode: "number" }),
    deliveryStatus: text("delivery_status").notNull().default("none"),
    deliveryAttempts: integer("delivery_attempts").notNull().default(0),
    deliveryLastError: text("delivery_last_error"),
    /**
     * delivery_attempts when the current round of attempts began (a redelivery starts a round):
     * SIGNALBOX_DELIVERY_MAX_ATTEMPTS and the backoff count from here, the attempt numbers go on.
     */
    deliveryRoundStart: integer("delivery_round_start").notNull().default(0),
    /**
     * How many rounds were begun (each redelivery adds one): an attempt answered after a round
     * began that it was not sent in is an earlier round's (signalbox.sent_in_earlier_round).
     */
    deliveryRound: integer("delivery_round").notNull().default(0),
    /** external (a sender POSTs), timer, sensor, all / any (composite over member waits). */
    kind: text("kind").notNull().default("external"),
    /** The timer or sensor spec, as given. */
    source: jsonb("source"),
    /** Timers: when the wait is received. */
    firesAt: tz("fires_at"),
    sensorPolls: integer("sensor_polls").notNull().default(0),
    /** Composite members point at their parent wait. */
    parentWaitId: text("parent_wait_id"),
    /** {count, veto}: received when `count` distinct responders agree, or at once on a veto. */
    quorum: jsonb("quorum"),
    /** Quorum waits: the distinct responders so far, by response ({"approve": ["kim", "lee"]}). */
    votes: jsonb("votes"),
    /**
     * The callback's JSON answer: the body of the first 2xx (application/json, at most 64 KiB;
     * NULL for any other answer). Set once, with replied_at (db/functions/record_delivery_attempt.sql):
     * a redelivery's answer does not replace it.
     */
    reply: jsonb("reply"),
    /** When the callback was first delivered: the reply is known from then (NULL reply: the answer had no JSON body). */
    repliedAt: tz("replied_at"),
  },
  (t) => [
    check("waits_status", sql`${t.status} in ('waiting', 'received', 'timed_out', 'cancelled')`),
    check("waits_resolved_at", sql`(${t.status} = 'waiting') = (${t.resolvedAt} is null)`),
    check("waits_received_has_signal", sql`(${t.status} = 'received') = (${t.signalId} is not null)`),
    check("waits_delivery_status", sql`${t.deliveryStatus} in ('none', 'pending', 'delivered', 'failed')`),
    // Idempotent creation: the same run and key is the same wait.
    uniqueIndex("waits_run_key").on(t.runId, t.key).where(sql`${t.key} is not null`),
    // At most one open wait per run and signal name.
    uniqueIndex("waits_one_open").on(t.runId, t.signal).where(sql`${t.status} = 'waiting'`),
    index("waits_run_created").on(t.runId, t.createdAt, t.id),
    index("waits_signal_status_created").on(t.signal, t.status, t.createdAt, t.id),
    index("waits_status_created").on(t.status, t.createdAt, t.id),
    index("waits_open_deadline").on(t.timeoutAt).where(sql`${t.status} = 'waiting'`),
    // GET /waits?signal=…&deadline_before=…: one name's open deadlines, not every name's (at a
    // million open waits, waits_open_deadline's range read ~5,000 pages for 51 rows).
    index("waits_open_signal_deadline").on(t.signal, t.timeoutAt).where(sql`${t.status} = 'waiting' and ${t.timeoutAt} is not null`),
    // Partial: most waits carry no metadata, and an empty object would still cost every insert
    // and status change a GIN entry. Queries add `metadata <> '{}'` so the planner may use it.
    index("waits_metadata").using("gin", sql`${t.metadata} jsonb_path_ops`).where(sql`${t.metadata} <> '{}'::jsonb`),
    index("waits_parent").on(t.parentWaitId).where(sql`${t.parentWaitId} is not null`),
    // Retention: resolved waits, oldest first (src/retention). Not on delivery_status, so a
    // delivery's status update stays a HOT update.
    index("waits_resolved").on(t.resolvedAt).where(sql`${t.status} <> 'waiting'`),
    check("waits_kind", sql`${t.kind} in ('external', 'timer', 'sensor', 'all', 'any')`),
    // What the one transition (db/functions/resolve_waits.sql) keeps true, stated where no code can break it.
    check("waits_resolution_event", sql`(${t.status} = 'waiting') = (${t.resolutionEventId} is null)`),
    check("waits_delivery_needs_callback", sql`${t.callbackUrl} is not null or ${t.deliveryStatus} = 'none'`),
    check("waits_timer_fires_at", sql`${t.kind} <> 'timer' or ${t.firesAt} is not null`),
    check("waits_not_own_parent", sql`${t.parentWaitId} is null or ${t.parentWaitId} <> ${t.id}`),
  ],
);

export const signals = signalbox.table(
  "signals",
  {
    id: text("id").primaryKey(),
    runId: text("run_id").notNull(),
    signal: text("signal").notNull(),
    /** Set only on accepted signals (received, buffered, started, or expired: buffered and never consumed). */
    sequence: bigint("sequence", { mode: "number" }),
    outcome: text("outcome").notNull(),
    /**
     * The payload exactly as received (JSON text), never re-serialised. A rejected signal keeps
     * it only up to a few KiB (db/functions/reject_signal.sql): anyone may send rejections.
     */
    payload: text("payload"),
    payloadHash: text("payload_hash"),
    /** A rejected signal's payload size in bytes, recorded when the payload itself was not kept. */
    payloadBytes: integer("payload_bytes"),
    idempotencyKey: text("idempotency_key"),
    validationErrors: jsonb("validation_errors"),
    receivedAt: tz("received_at").notNull().defaultNow(),
    /** The wait this signal resolved: at once (received) or later (a buffered signal consumed). */
    waitId: text("wait_id"),
    /**
     * Buffered signals: usable until then; consumed ones have wait_id set. Past it, an unconsumed
     * one is shown as `expired` at once, and the retention job marks it so (src/retention).
     * Null on a `started` signal and on the signals buffered behind it before the run's first
     * wait of that name opened: kept until a wait consumes them (or retention purges them by age).
     */
    bufferExpiresAt: tz("buffer_expires_at"),
    /**
     * A redriven dead letter (POST /signals/redrive): the record this attempt sent again. No
     * foreign key: retention may purge the original first (it is older).
     */
    redrivenFrom: text("redriven_from"),
    /**
     * The reply of the wait this signal resolved (its callback's JSON answer), copied in the statement
     * that stores it on the wait; the wait's replied_at says whether it is known.
     */
    reply: jsonb("reply"),
  },
  (t) => [
    check("signals_accepted_have_sequence", sql`(${t.outcome} in ('received', 'buffered', 'started', 'expired')) = (${t.sequence} is not null)`),
    // OUTCOMES (src/signals/signal-outcome.ts) that are recorded, and expired; test/db/enumerations.test.ts holds them equal.
    check(
      "signals_outcome",
      sql`${t.outcome} in ('received', 'buffered', 'started', 'expired', 'rejected_idempotency_conflict', 'rejected_unauthenticated', 'rejected_unknown_signal', 'rejected_not_waiting', 'rejected_not_active', 'rejected_invalid_payload', 'payload_too_large', 'invalid_json')`,
    ),
    uniqueIndex("signals_run_sequence").on(t.runId, t.sequence).where(sql`${t.sequence} is not null`),
    // Idempotency: one accepted signal per run, name and key.
    uniqueIndex("signals_idempotency")
      .on(t.runId, t.signal, t.idempotencyKey)
      .where(sql`${t.idempotencyKey} is not null and ${t.sequence} is not null`),
    index("signals_run_received").on(t.runId, t.receivedAt, t.id),
    index("signals_outcome_received").on(t.outcome, t.receivedAt, t.id),
    index("signals_received").on(t.receivedAt, t.id),
    // What a new wait may consume, in sequence order: buffered signals and a started one (signal-with-start).
    index("signals_kept_open")
      .on(t.runId, t.signal, t.sequence)
      .where(sql`${t.outcome} in ('buffered', 'started') and ${t.waitId} is null`),
    // Retention (src/retention): a wait's signals go with it; the others (rejections, buffered
    // signals never consumed) by age; buffered signals past their TTL are marked expired.
    index("signals_wait").on(t.waitId).where(sql`${t.waitId} is not null`),
    index("signals_without_wait_received").on(t.receivedAt).where(sql`${t.waitId} is null`),
    index("signals_buffer_expiry").on(t.bufferExpiresAt).where(sql`${t.outcome} = 'buffered' and ${t.waitId} is null`),
    // Rejected signals of one type, oldest first: past the per-type cap the oldest are purged.
    index("signals_rejected_by_type").on(t.signal, t.receivedAt).where(sql`${t.sequence} is null`),
    // A signal is redriven at most once: a database fact, whatever races the verb loses.
    uniqueIndex("signals_redriven_from").on(t.redrivenFrom).where(sql`${t.redrivenFrom} is not null`),
  ],
);

/** A run's history, oldest first by id. */
export const events = signalbox.table(
  "events",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedByDefaultAsIdentity(),
    /** Every event belongs to a run row, as every wait does (signals do not: a rejection makes no run). */
    runId: text("run_id").notNull().references(() => runs.runId),
    type: text("type").notNull(),
    waitId: text("wait_id"),
    signalId: text("signal_id"),
    data: jsonb("data").notNull().default({}),
    occurredAt: tz("occurred_at").notNull().defaultNow(),
  },
  (t) => [
    index("events_run_id").on(t.runId, t.id),
    // Retention (src/retention): a wait's events go with it; the others (run.*, signal.buffered) by age.
    index("events_wait").on(t.waitId).where(sql`${t.waitId} is not null`),
    index("events_without_wait_occurred").on(t.occurredAt).where(sql`${t.waitId} is null`),
    // EVENT_TYPES (src/events/events.queries.ts); test/db/enumerations.test.ts holds the two equal.
    check(
      "events_type",
      sql`${t.type} in ('signal.waiting', 'signal.received', 'signal.buffered', 'signal.timeout', 'signal.cancelled', 'signal.vote', 'run.started', 'run.pausing', 'run.paused', 'run.resumed', 'run.cancelling', 'run.cancelled', 'run.continued', 'run.continued_from')`,
    ),
  ],
);

/**
 * Replay protection for schemes that sign a message id (standard-webhooks): an id is accepted
 * once per signal type, across runs, for at least twice the timestamp tolerance.
 */
export const webhookReceipts = signalbox.table(
  "webhook_receipts",
  {
    signalType: text("signal_type").notNull(),
    webhookId: text("webhook_id").notNull(),
    runId: text("run_id").notNull(),
    expiresAt: tz("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.signalType, t.webhookId] }), index("webhook_receipts_expires").on(t.expiresAt)],
);

/** Liveness of each process's job worker pool, so jobs a dead process had locked are released. */
export const workerPools = signalbox.table("worker_pools", {
  poolId: text("pool_id").primaryKey(),
  seenAt: tz("seen_at").notNull().defaultNow(),
});

/**
 * Which version of each SQL function source (db/functions/*.sql) the database holds: the
 * migrate step re-applies a file only when its digest differs (src/db/apply-functions.ts).
 */
export const functionSources = signalbox.table("function_sources", {
  file: text("file").primaryKey(),
  sha256: text("sha256").notNull(),
  appliedAt: tz("applied_at").notNull().defaultNow(),
});

/** Quorum votes: one per responder per wait (the first stands). */
export const votes = signalbox.table(
  "votes",
  {
    waitId: text("wait_id").notNull(),
    responder: text("responder").notNull(),
    response: text("response").notNull(),
    signalId: text("signal_id").notNull(),
    votedAt: tz("voted_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.waitId, t.responder] })],
);

/** Approval links that were used: a link works once. */
export const linkUses = signalbox.table(
  "link_uses",
  {
    linkId: text("link_id").primaryKey(),
    waitId: text("wait_id").notNull(),
    usedAt: tz("used_at").notNull().defaultNow(),
  },
  // Retention: a purged wait's link uses go with it (a kept wait's stay: a link works once).
  (t) => [index("link_uses_wait").on(t.waitId)],
);

/** signal.waiting and signal.reminder events for a signal type's notify_url, delivered like callbacks. */
export const notifications = signalbox.table(
  "notifications",
  {
    id: text("id").primaryKey(),
    waitId: text("wait_id").notNull(),
    type: text("type").notNull(),
    url: text("url").notNull(),
    status: text("status").notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    lastError: text("last_error"),
    /** When the event occurs (its `occurred_at`): the wait's opening, or a reminder's due time. */
    createdAt: tz("created_at").notNull().defaultNow(),
  },
  (t) => [
    index("notifications_wait").on(t.waitId),
    // Retention: old delivered, failed or skipped notifications by age. Not partial on status, so
    // a delivery's status update stays a HOT update.
    index("notifications_created").on(t.createdAt),
    check("notifications_status", sql`${t.status} in ('pending', 'delivered', 'failed', 'skipped')`),
    check("notifications_type", sql`${t.type} in ('signal.waiting', 'signal.reminder')`),
  ],
);

/**
 * Every recorded attempt to deliver a wait's callback, oldest first (src/delivery). Recorded by
 * the attempt's compare-and-set on the wait (db/functions/record_delivery_attempt.sql), so an
 * attempt number is recorded once per wait; a redelivery's attempts go on numbering.
 */
export const deliveryAttempts = signalbox.table(
  "delivery_attempts",
  {
    id: bigint("id", { mode: "number" }).primaryKey().generatedByDefaultAsIdentity(),
    /** A wait's callback attempt; null on a run start's attempt (start_run_id). */
    waitId: text("wait_id"),
    /** A `run.start` event's attempt (run_starts): the run it starts. */
    startRunId: text("start_run_id"),
    /** 1, 2, 3... per wait (or run start), across redeliveries. */
    attempt: integer("attempt").notNull(),
    /** The event the callback carried: its id is the `webhook-id` the endpoint saw. */
    eventId: bigint("event_id", { mode: "number" }).notNull(),
    startedAt: tz("started_at").notNull(),
    durationMs: integer("duration_ms").notNull(),
    /** The endpoint's HTTP status; null when no answer came (refused, reset, timed out). */
    statusCode: integer("status_code"),
    error: text("error"),
    /** What this attempt made of the delivery: delivered, retry (another attempt is due), failed (given up). */
    outcome: text("outcome").notNull(),
    /** The callback URL's host[:port] (never its credentials, path or query): the endpoint. */
    callbackHost: text("callback_host").notNull(),
    /** The wait's latest attempt so far: the cross-wait listing reads these only. */
    latest: boolean("latest").notNull().default(true),
  },
  (t) => [
    check("delivery_attempts_outcome", sql`${t.outcome} in ('delivered', 'retry', 'failed')`),
    check("delivery_attempts_attempt", sql`${t.attempt} >= 1`),
    check("delivery_attempts_one_owner", sql`(${t.waitId} is null) <> (${t.startRunId} is null)`),
    uniqueIndex("delivery_attempts_start_attempt").on(t.startRunId, t.attempt).where(sql`${t.startRunId} is not null`),
    // A wait's attempts in order, and the compare-and-set's guard: one row per attempt number.
    uniqueIndex("delivery_attempts_wait_attempt").on(t.waitId, t.attempt),
    // GET /deliveries: deliveries whose latest attempt failed (failed, or pending a retry), by
    // when it was made, across waits and per endpoint. Partial: a first attempt that delivers
    // (nearly all of them) costs these indexes nothing, and superseded attempts leave them.
    index("delivery_attempts_failing").on(t.startedAt, t.id).where(sql`${t.latest} and ${t.outcome} <> 'delivered'`),
    index("delivery_attempts_failing_host").on(t.callbackHost, t.startedAt, t.id).where(sql`${t.latest} and ${t.outcome} <> 'delivered'`),
  ],
);

/**
 * Signal-with-start: the one `run.start` event of a run that a signal of a type with `start`
 * found never seen (db/functions/start_run.sql), and its delivery, kept like a wait's callback
 * delivery (status, attempts, rounds; attempts in delivery_attempts by start_run_id). The
 * primary key is the rule: exactly one start per run.
 */
export const runStarts = signalbox.table(
  "run_starts",
  {
    runId: text("run_id")
      .primaryKey()
      .references(() => runs.runId),
    /** The `started` signal: the event carries its id, name and payload. */
    signalId: text("signal_id").notNull(),
    signal: text("signal").notNull(),
    /** The signal type's start URL when the run started. */
    url: text("url").notNull(),
    /** The run.started history event: its id is the `webhook-id` of every attempt. */
    eventId: bigint("event_id", { mode: "number" }).notNull(),
    occurredAt: tz("occurred_at").notNull().defaultNow(),
    deliveryStatus: text("delivery_status").notNull().default("pending"),
    deliveryAttempts: integer("delivery_attempts").notNull().default(0),
    deliveryLastError: text("delivery_last_error"),
    /** As waits.delivery_round_start: a redelivery starts a new round of attempts. */
    deliveryRoundStart: integer("delivery_round_start").notNull().default(0),
    /** As waits.delivery_round. */
    deliveryRound: integer("delivery_round").notNull().default(0),
  },
  (t) => [
    check("run_starts_delivery_status", sql`${t.deliveryStatus} in ('pending', 'delivered', 'failed')`),
    // Retention: delivered or failed starts by age.
    index("run_starts_occurred").on(t.occurredAt),
  ],
);
