import createFetchClient, { type Client } from "openapi-fetch";
import type { paths } from "./generated/openapi.ts";
import { CountedRequest, pathSerializer, unwrap, type FetchResult } from "./http.ts";
import { withRetries, type RetryOptions } from "./retry.ts";
import { followRunEvents, type FollowOptions } from "./follow-run-events.ts";
import { waitForWait, type WaitForOptions } from "./wait-for.ts";
import type {
  ApprovalLinks,
  CheckpointAnswer,
  CreateApprovalLinks,
  DeliveryAttemptList,
  RunStart,
  StartDeliveryAttemptList,
  FailingDeliveryList,
  FindWaitsQuery,
  ListDeliveriesQuery,
  ListSignalsQuery,
  OpenWait,
  RedriveFilter,
  RedriveResult,
  Run,
  RunControl,
  RunContinue,
  RunEvent,
  RunEventList,
  SignalAccepted,
  SignalBatch,
  SignalBatchResults,
  SignalList,
  SignalRedriven,
  SignalWithReply,
  SignalType,
  SignalTypeInput,
  SignalTypeList,
  Wait,
  WaitList,
  WaitStatus,
} from "./types.ts";

export interface ClientOptions {
  /** Where signalbox listens, e.g. `http://localhost:8080`. */
  baseUrl: string;
  /** A management token: a key from `SIGNALBOX_API_KEYS`, or a JWT. Sent as `Authorization: Bearer`. */
  token?: string;
  /** A fetch to send requests with (tests, proxies, instrumentation); default the global one. */
  fetch?: (request: Request) => Promise<Response>;
  /** How `signals.send` retries after no answer or a 502/503/504 (default 5 attempts). */
  retry?: RetryOptions;
}

/** Options every call takes. */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface SendOptions extends CallOptions {
  /**
   * Makes the send safe to repeat: the same key and payload again is a `duplicate`, not a second
   * signal. Generated when absent, so the retries of this one call are safe; pass your own (an
   * event id, a step path) to make calls repeated by your own code safe too. Not empty (a
   * `TypeError`): signalbox would take it for no key.
   */
  idempotencyKey?: string;
  /** Overrides the client's `retry` for this call. */
  retry?: RetryOptions;
  /**
   * Hold the answer up to this many seconds (at most 60) until the resume callback of the wait
   * the signal resolved is delivered: the result then has the callback's `reply`. When the time
   * runs out first, `reply_pending` is true (read it later with `signals.get`).
   */
  waitS?: number;
}

/** An accepted signal, with the idempotency key it was sent with (generated or given). */
export type SendResult = SignalAccepted & { idempotency_key: string };

/**
 * A signalbox client. `api` is the raw typed client (openapi-fetch) for every operation of the
 * OpenAPI document; the namespaces wrap each operation in one call that returns the resource or
 * throws a `SignalboxProblem` (an error answer) or `SignalboxConnectionError` (no answer).
 */
export function createClient(options: ClientOptions) {
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  // fetch refuses a URL with credentials, and every error would then print the password. Not
  // echoed here either; the token is the way to authenticate.
  if (hasUserinfo(baseUrl)) throw new TypeError("baseUrl must not contain a user name or password: give a token (`token`) instead");
  const headers: Record<string, string> = options.token ? { authorization: `Bearer ${options.token}` } : {};
  const api: Client<paths> = createFetchClient<paths>({ baseUrl, headers, Request: CountedRequest, pathSerializer, ...(options.fetch ? { fetch: options.fetch } : {}) });
  const call = <T>(send: () => Promise<FetchResult<T>>, signal?: AbortSignal): Promise<T> => unwrap(baseUrl, send, signal);
  const id = (value: string) => ({ path: { id: value } });
  const run = (value: string) => ({ path: { run: value } });

  const waits = {
    /** Opens a wait (201), or returns the run's wait with the same `key` (200). */
    open: (runId: string, body: OpenWait, o: CallOptions = {}): Promise<Wait> =>
      call(() => api.POST("/runs/{run}/waits", { params: run(runId), body, signal: o.signal }), o.signal),
    /** Reads a wait; with `waitS`, the answer is held (up to 60 s) while the wait is `waiting`. */
    get: (waitId: string, o: CallOptions & { waitS?: number } = {}): Promise<Wait> =>
      call(() => api.GET("/waits/{id}", { params: { ...id(waitId), query: o.waitS === undefined ? {} : { wait_s: o.waitS } }, signal: o.signal }), o.signal),
    /** Resolves with the wait once it has left `waiting`; throws `WaitTimeoutError` after `timeoutMs`. */
    waitFor: (waitId: string, o: WaitForOptions): Promise<Wait> => waitForWait((waitS, signal) => waits.get(waitId, { waitS, signal }), o),
    /** Waits across runs, oldest first: by signal, status, run, deadline, metadata. */
    find: (query: FindWaitsQuery = {}, o: CallOptions = {}): Promise<WaitList> => {
      const { metadata, ...rest } = query;
      // The key is encoded here (openapi-fetch encodes values only): '&', '+' or '#' would break the query.
      const byMetadata = Object.fromEntries(Object.entries(metadata ?? {}).map(([k, v]) => [`metadata.${encodeURIComponent(k)}`, v]));
      // metadata.<key> parameters cannot be listed in the document, hence the cast.
      return call(() => api.GET("/waits", { params: { query: { ...rest, ...byMetadata } as typeof rest }, signal: o.signal }), o.signal);
    },
    /** One run's waits. */
    ofRun: (runId: string, query: { status?: WaitStatus; limit?: number; cursor?: string } = {}, o: CallOptions = {}): Promise<WaitList> =>
      call(() => api.GET("/runs/{run}/waits", { params: { ...run(runId), query }, signal: o.signal }), o.signal),
    cancel: (waitId: string, o: CallOptions = {}): Promise<Wait> =>
      call(() => api.POST("/waits/{id}/cancel", { params: id(waitId), signal: o.signal }), o.signal),
    /** Sends the resume callback again (after a failed delivery, or now instead of after a pending retry's backoff). */
    redeliver: (waitId: string, o: CallOptions = {}): Promise<Wait> =>
      call(() => api.POST("/waits/{id}/redeliver", { params: id(waitId), signal: o.signal }), o.signal),
    /** Every recorded attempt to deliver the wait's callback. */
    deliveries: (waitId: string, query: { limit?: number; cursor?: string } = {}, o: CallOptions = {}): Promise<DeliveryAttemptList> =>
      call(() => api.GET("/waits/{id}/deliveries", { params: { ...id(waitId), query }, signal: o.signal }), o.signal),
    /** Signed approval links, one per allowed response of the signal type. */
    links: (waitId: string, body: CreateApprovalLinks, o: CallOptions = {}): Promise<ApprovalLinks> =>
      call(() => api.POST("/waits/{id}/links", { params: id(waitId), body, signal: o.signal }), o.signal),
  };

  const signals = {
    /**
     * Sends a signal with the management token. Retried after no answer and after 502/503/504,
     * always with the same idempotency key, so a retry never makes a second signal: if an earlier
     * attempt got through unseen, the answer is `duplicate`, repeating that attempt's signal id.
     */
    send: (runId: string, name: string, payload: unknown, o: SendOptions = {}): Promise<SendResult> => {
      // signalbox takes an empty Idempotency-Key for none: a retry would record the signal again.
      if (o.idempotencyKey === "") return Promise.reject(new TypeError("idempotencyKey must not be empty: leave it out to have one generated"));
      const key = o.idempotencyKey ?? crypto.randomUUID();
      const attempt = () =>
        call(
          () =>
            api.POST("/signals/{run}/{signal}", {
              params: { path: { run: runId, signal: name }, header: { "idempotency-key": key }, query: o.waitS === undefined ? {} : { wait_s: o.waitS } },
              body: payload,
              signal: o.signal,
            }),
          o.signal,
        );
      return withRetries(attempt, o.retry ?? options.retry, o.signal).then((accepted) => ({ ...accepted, idempotency_key: key }));
    },
    /** A signal record with its reply; with `waitS`, held (up to 60 s) while the reply is pending. */
    get: (signalId: string, o: CallOptions & { waitS?: number } = {}): Promise<SignalWithReply> =>
      call(() => api.GET("/signals/{id}", { params: { ...id(signalId), query: o.waitS === undefined ? {} : { wait_s: o.waitS } }, signal: o.signal }), o.signal),
    /** Several signals in one request, each answered on its own, in order. No `waitS`: send one by one to wait for replies. */
    batch: (body: SignalBatch, o: CallOptions = {}): Promise<SignalBatchResults> =>
      call(() => api.POST("/signals/batch", { body, signal: o.signal }), o.signal),
    /** The signal log across runs, e.g. `{ outcome: "rejected_not_waiting" }` for the dead letters. */
    list: (query: ListSignalsQuery = {}, o: CallOptions = {}): Promise<SignalList> =>
      call(() => api.GET("/signals", { params: { query }, signal: o.signal }), o.signal),
    ofRun: (runId: string, query: { limit?: number; cursor?: string } = {}, o: CallOptions = {}): Promise<SignalList> =>
      call(() => api.GET("/runs/{run}/signals", { params: { ...run(runId), query }, signal: o.signal }), o.signal),
    /**
     * Sends a dead letter (`rejected_not_waiting`, `expired`, `rejected_invalid_payload`) again, at
     * most once. Resolves with the new attempt's intake answer (`received`, `buffered`, or
     * `duplicate`); a new attempt that is rejected again throws a `SignalboxProblem` whose body has
     * its `outcome`, `signal_id` and `redriven_from`, as do `already_redriven`, `not_redrivable` and
     * `payload_not_kept` (without an `outcome`). Not retried by the client; resending after a lost
     * answer is safe, though: a redrive that got through makes it `already_redriven`, naming it.
     */
    redrive: (signalId: string, o: CallOptions = {}): Promise<SignalRedriven> =>
      call(() => api.POST("/signals/redrive", { body: { signal_id: signalId }, signal: o.signal }), o.signal) as Promise<SignalRedriven>,
    /** Redrives every dead letter matching the filter (at most 10,000 a call: `more` says if any are left). */
    redriveMatching: (filter: RedriveFilter, o: CallOptions = {}): Promise<RedriveResult> =>
      call(() => api.POST("/signals/redrive", { body: { filter }, signal: o.signal }), o.signal) as Promise<RedriveResult>,
  };

  const signalTypes = {
    /** Creates (201) or replaces (200) a signal type. */
    put: (name: string, body: SignalTypeInput, o: CallOptions = {}): Promise<SignalType> =>
      call(() => api.PUT("/signal-types/{name}", { params: { path: { name } }, body, signal: o.signal }), o.signal),
    get: (name: string, o: CallOptions = {}): Promise<SignalType> =>
      call(() => api.GET("/signal-types/{name}", { params: { path: { name } }, signal: o.signal }), o.signal),
    list: (query: { limit?: number; cursor?: string } = {}, o: CallOptions = {}): Promise<SignalTypeList> =>
      call(() => api.GET("/signal-types", { params: { query }, signal: o.signal }), o.signal),
    delete: (name: string, o: CallOptions = {}): Promise<void> =>
      call(() => api.DELETE("/signal-types/{name}", { params: { path: { name } }, signal: o.signal }), o.signal),
  };

  const runs = {
    get: (runId: string, o: CallOptions = {}): Promise<Run> => call(() => api.GET("/runs/{run}", { params: run(runId), signal: o.signal }), o.signal),
    cancel: (runId: string, body: RunControl = {}, o: CallOptions = {}): Promise<Run> =>
      call(() => api.POST("/runs/{run}/cancel", { params: run(runId), body, signal: o.signal }), o.signal),
    pause: (runId: string, body: RunControl = {}, o: CallOptions = {}): Promise<Run> =>
      call(() => api.POST("/runs/{run}/pause", { params: run(runId), body, signal: o.signal }), o.signal),
    resume: (runId: string, body: { by?: string } = {}, o: CallOptions = {}): Promise<Run> =>
      call(() => api.POST("/runs/{run}/resume", { params: run(runId), body, signal: o.signal }), o.signal),
    /**
     * Continue-as-new: the run's open waits are cancelled (reason `continued`), its buffered
     * signals move to `newRunId`, and every later signal and wait addressed to the run goes to
     * the newest run of its chain. Again to the same run: the run as it is; otherwise a 409
     * problem (`already_continued`, `continue_cycle`, `target_has_predecessor`, `run_cancelled`,
     * `target_cancelled`).
     */
    continue: (runId: string, newRunId: string, body: RunContinue = {}, o: CallOptions = {}): Promise<Run> =>
      call(() => api.POST("/runs/{run}/continue", { params: run(runId), body: { ...body, run_id: newRunId }, signal: o.signal }), o.signal),
    addChild: (runId: string, childRunId: string, o: CallOptions = {}): Promise<Run> =>
      call(() => api.POST("/runs/{run}/children", { params: run(runId), body: { run_id: childRunId }, signal: o.signal }), o.signal),
    removeChild: (runId: string, childRunId: string, o: CallOptions = {}): Promise<Run> =>
      call(() => api.DELETE("/runs/{run}/children", { params: { ...run(runId), query: { run_id: childRunId } }, signal: o.signal }), o.signal),
    /** `{ proceed: true }` unless the run is paused; while paused it is held up to `waitS`. */
    checkpoint: (runId: string, name: string, o: CallOptions & { waitS?: number } = {}): Promise<CheckpointAnswer> =>
      call(
        () => api.POST("/runs/{run}/checkpoints/{name}", { params: { path: { run: runId, name }, query: o.waitS === undefined ? {} : { wait_s: o.waitS } }, signal: o.signal }),
        o.signal,
      ),
    /** One page of the run's history, oldest first. */
    events: (runId: string, query: { after?: string; limit?: number } = {}, o: CallOptions = {}): Promise<RunEventList> =>
      // The operation also answers text/event-stream (a string, to the types); without that Accept it answers JSON.
      call(() => api.GET("/runs/{run}/events", { params: { ...run(runId), query }, signal: o.signal }), o.signal) as Promise<RunEventList>,
    /** Signal-with-start: the run's `run.start` event and its delivery (404 when no signal started the run). */
    start: (runId: string, o: CallOptions = {}): Promise<RunStart> => call(() => api.GET("/runs/{run}/start", { params: run(runId), signal: o.signal }), o.signal),
    /** Every recorded attempt to deliver the run's `run.start` event. */
    startDeliveries: (runId: string, query: { limit?: number; cursor?: string } = {}, o: CallOptions = {}): Promise<StartDeliveryAttemptList> =>
      call(() => api.GET("/runs/{run}/start/deliveries", { params: { ...run(runId), query }, signal: o.signal }), o.signal),
    /** Sends the run's `run.start` event again (a new round of attempts, the same webhook-id). */
    redeliverStart: (runId: string, o: CallOptions = {}): Promise<RunStart> =>
      call(() => api.POST("/runs/{run}/start/redeliver", { params: run(runId), signal: o.signal }), o.signal),
    /** The run's history, then its new events as they happen (SSE, reconnecting where it left off). */
    follow: (runId: string, o: FollowOptions = {}): AsyncGenerator<RunEvent> => followRunEvents(api, baseUrl, runId, o),
  };

  const deliveries = {
    /** Callbacks and run starts failing now (`failed`, or `pending` a retry) across waits (`kind` tells them apart). */
    list: (query: ListDeliveriesQuery = {}, o: CallOptions = {}): Promise<FailingDeliveryList> =>
      call(() => api.GET("/deliveries", { params: { query }, signal: o.signal }), o.signal),
  };

  return { baseUrl, api, waits, signals, signalTypes, runs, deliveries };
}

export type SignalboxClient = ReturnType<typeof createClient>;

function hasUserinfo(url: string): boolean {
  try {
    const u = new URL(url);
    return u.username !== "" || u.password !== "";
  } catch {
    return false; // not a URL: the first request says so
  }
}

/**
 * Every item of a paginated list, following `next_cursor`:
 * `for await (const wait of paginate((cursor) => client.waits.find({ status: "waiting", cursor })))`.
 */
export async function* paginate<T>(page: (cursor: string | undefined) => Promise<{ items: T[]; next_cursor: string | null }>): AsyncGenerator<T> {
  let cursor: string | undefined;
  do {
    const { items, next_cursor } = await page(cursor);
    yield* items;
    cursor = next_cursor ?? undefined;
  } while (cursor !== undefined);
}
