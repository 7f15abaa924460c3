import postgres from "postgres";
import type { Log } from "../core/logger.ts";
import { withinMs } from "../core/time-limit.ts";
import { CONNECT_TIMEOUT_S, reconnectDelayS } from "./client.ts";
import { postgresJs } from "./connection-url.ts";
import { guardedSockets } from "./silent-connections.ts";

/** What the change feed and the signal type cache use of a postgres.js client: LISTEN and NOTIFY. */
export interface Listener {
  listen(channel: string, onNotify: (payload: string) => void, onListen?: () => void): Promise<{ unlisten(): Promise<void> }>;
  notify(channel: string, payload: string): Promise<unknown>;
}

/**
 * How long a renewal may take to listen again on every channel: a connect (CONNECT_TIMEOUT_S)
 * and a LISTEN each, quick on a database that answers (renew runs only while it does). Its new
 * connection may go silent too (a failover or a network cut: open, no answer); waited on, it
 * would hold the supervisor, which renews nothing more, for good.
 */
const RENEW_MS = 5_000;

interface Subscription {
  channel: string;
  onNotify: (payload: string) => void;
  onListen?: () => void;
  unlisten?: () => Promise<void>;
}

/**
 * This process's LISTEN connection, on a client of its own that can be replaced. postgres.js
 * listens again by itself after its connection closed; a connection that went silent (a
 * failover or a network cut leaves it open, with no error) never closes, and no NOTIFY arrives
 * again. `renew` then opens a new client, listens there on every channel (each `onListen` is
 * called, as on any reconnect: what was missed is read again) and drops the old one.
 */
export class ListenConnection implements Listener {
  readonly #open: () => postgres.Sql;
  #sql: postgres.Sql;
  readonly #subscriptions = new Set<Subscription>();

  constructor(url: string) {
    // Reconnects as soon as the pool's clients do (client.ts): postgres.js's own backoff grows to 20 s.
    // Its sockets are guarded as the pool's are: one that leaves a statement (a NOTIFY, a LISTEN,
    // the goodbye of a client ended) unanswered is dropped. An idle LISTEN sends nothing, so it
    // is not judged by this: a silent one is found by `renew`'s supervisor.
    const socket = guardedSockets();
    this.#open = () =>
      postgresJs(url, {
        max: 1,
        connect_timeout: CONNECT_TIMEOUT_S,
        backoff: reconnectDelayS,
        onnotice: () => {},
        connection: { application_name: "signalbox-listen" },
        ...({ socket } as object), // postgres.js's own option, missing from its types
      });
    this.#sql = this.#open();
  }

  async listen(channel: string, onNotify: (payload: string) => void, onListen?: () => void): Promise<{ unlisten(): Promise<void> }> {
    const sub: Subscription = { channel, onNotify, onListen };
    sub.unlisten = (await this.#sql.listen(channel, onNotify, onListen)).unlisten;
    this.#subscriptions.add(sub);
    return {
      unlisten: async () => {
        this.#subscriptions.delete(sub);
        await sub.unlisten?.();
      },
    };
  }

  notify(channel: string, payload: string): Promise<unknown> {
    return this.#sql.notify(channel, payload);
  }

  /**
   * Listens on every channel again on a new client; the old one is ended without waiting on it.
   * Fails after RENEW_MS, the new client ended too: the next renewal starts afresh.
   */
  async renew(): Promise<void> {
    const old = this.#sql;
    const sql = (this.#sql = this.#open());
    void old.end({ timeout: 0 }).catch(() => {});
    const listening = (async () => {
      for (const sub of this.#subscriptions) sub.unlisten = (await sql.listen(sub.channel, sub.onNotify, sub.onListen)).unlisten;
    })();
    await withinMs(listening, RENEW_MS, "listening on a new connection").catch((err: unknown) => {
      void sql.end({ timeout: 0 }).catch(() => {});
      throw err;
    });
  }

  async close(): Promise<void> {
    await this.#sql.end({ timeout: 0 });
  }
}

/** Looks this often whether the LISTEN connection delivers, and renews it after this many misses in a row. */
const WATCH_EVERY_MS = 2_000;
const MISSES_TO_RENEW = 3;

/**
 * Watches the LISTEN connection (`delivers`: a NOTIFY this process sent itself came back) and
 * renews it when it stopped delivering while the database answers. While the database is away
 * postgres.js reconnects by itself; this is for the connection left silent.
 */
export function superviseListening(opts: { connection: ListenConnection; delivers: () => Promise<boolean>; databaseUp: () => boolean; log: Log }): () => void {
  let misses = 0;
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    void (async () => {
      if (!opts.databaseUp() || (await opts.delivers())) return void (misses = 0);
      if (++misses < MISSES_TO_RENEW) return;
      misses = 0;
      opts.log.warn("the LISTEN connection stopped delivering while the database answers: listening on a new one");
      await opts.connection.renew().catch((err: unknown) => opts.log.warn({ err }, "listening on a new connection failed; trying again"));
    })().finally(() => (busy = false));
  }, WATCH_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
