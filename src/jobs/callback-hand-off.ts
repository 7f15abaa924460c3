/** A callback batch job handed off: its id, and the waits whose callbacks it holds. */
export interface CallbackJob {
  id: string;
  waitIds: string[];
  /**
   * What each wait's callback carries, in waitIds' order, as the transaction that resolved them
   * read it (signalbox.receive_handing_off's JSON): the job's run need not read it again.
   */
  read?: unknown[];
}

/**
 * Where the callback jobs a transaction enqueued go once it has committed, to be run by this
 * process at once rather than fetched by a worker (the delivery engine takes them:
 * src/delivery/delivery-engine.ts). They were enqueued due `dueInS` from now
 * (db/functions/enqueue_callbacks.sql), so a worker runs them only should this process die or
 * fail to; each is completed once run. Saves each callback the NOTIFY that wakes every worker,
 * the job fetch and its round trips.
 */
export interface CallbackHandOff {
  /** How long a worker leaves them to this process. */
  readonly dueInS: number;
  /** Whether it takes more now (not while many it took are still under way: they then go to the workers). */
  hasRoom(): boolean;
  /** Runs them in the background; never throws (a job it cannot run is left for a worker). */
  take(jobs: CallbackJob[]): void;
}
