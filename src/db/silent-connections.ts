import net from "node:net";

/**
 * How long a pool connection may leave what it was sent unanswered before it counts as gone.
 * Far above any statement of ours and any wait for a run's lock (a cancel of a run with tens of
 * thousands of open waits takes seconds): a statement cut off this way may still commit (an
 * intake's Sync was sent), and its sender, told 503, would send it again. Yet bounded: a
 * request whose query went into a silent connection gets its 503 within this, not never.
 */
export const SILENT_AFTER_MS = 15_000;
const CHECK_EVERY_MS = 250;

// The protocol's first message has no type byte; these codes say which it is.
const PROTOCOL_3 = 196_608;
const TLS_REQUEST = 80_877_103;
const GSS_REQUEST = 80_877_104;
const SYNC = 0x53; // 'S'
const QUERY = 0x51; // 'Q'
const READY_FOR_QUERY = 0x5a; // 'Z'

interface Watched {
  /** The startup, Syncs and Queries sent whose ReadyForQuery has not come: the server owes an answer. */
  readyOwed: number;
  /** Something was sent after the last bytes came (a Describe's Flush, a Terminate): an answer is awaited. */
  sentSinceHeard: boolean;
  /** Chunks heard from the server, and their number at the last look. */
  heard: number;
  heardLooked: number;
  /** The look that last found something owed and new bytes heard, or the first owed (0: nothing owed). */
  since: number;
}

/**
 * The sockets of one pool (postgres.js's `socket` option), each destroyed once the server owed
 * it an answer and nothing came back for `silentAfterMs`. A connection left open and silent (a
 * failover or a network cut leaves it so, with no error and no reset) would otherwise hold every
 * query sent to it for good, and the pool would keep it: TCP keep-alive does not notice while
 * the peer's kernel still acknowledges, and postgres.js has no timeout for a query. Destroyed,
 * its queries fail as a closed connection (503, retried), and the pool opens a new one.
 *
 * What is owed is read from the protocol's plain text, message by message: every startup, Sync
 * and Query is answered by one ReadyForQuery, so queries pipelined behind an answered one stay
 * owed (byte counts cannot tell). Over TLS that text is the TLS socket's, which postgres.js
 * hands over once it made it (`onTls`, patches/postgres+*.patch): the socket made here then
 * carries only ciphertext.
 */
export function guardedSockets(silentAfterMs = SILENT_AFTER_MS): (options: { host: string[]; port: number[]; path?: string | false }) => net.Socket {
  const watched = new Map<net.Socket, Watched>();
  let timer: NodeJS.Timeout | undefined;
  let attempt = 0;

  const check = () => {
    const now = performance.now();
    for (const [socket, w] of watched) {
      if (socket.destroyed) watched.delete(socket);
      else if (w.readyOwed === 0 && !w.sentSinceHeard) w.since = 0;
      else if (w.since === 0 || w.heard !== w.heardLooked) [w.since, w.heardLooked] = [now, w.heard];
      else if (now - w.since >= silentAfterMs) {
        watched.delete(socket);
        socket.destroy(); // postgres.js fails its queries with CONNECTION_CLOSED and reconnects on demand
      }
    }
    if (watched.size === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  // What postgres.js does itself without the option: one host after another across attempts.
  return (options) => {
    const i = attempt++ % options.host.length;
    // Connected on the next turn: a connect that fails at once (no route) emits its error on the
    // next tick, before postgres.js (which awaits this factory) listens for it: uncaught.
    const socket = new net.Socket();
    const path = options.path;
    const w: Watched = { readyOwed: 0, sentSinceHeard: false, heard: 0, heardLooked: 0, since: 0 };
    const watchWrites = watchPlainText(socket, w);
    setImmediate(() => {
      // Not once postgres.js let go of it (a pool ended meanwhile): connect() would bring a destroyed
      // socket back to life, with nobody listening for its error (an uncaught exception).
      if (socket.destroyed) return;
      path ? socket.connect(path) : socket.connect(options.port[i]!, options.host[i]!);
      watchWrites(); // connect() puts net.Socket's own write back (the startup was written before)
    });
    // postgres.js reads host and port (TLS server name, error messages), and calls onTls.
    Object.assign(socket, { host: options.host[i], port: options.port[i], onTls: (secure: net.Socket) => watchPlainText(secure, w) });
    watched.set(socket, w);
    timer ??= setInterval(check, CHECK_EVERY_MS).unref();
    return socket;
  };
}

/**
 * Keeps `w` up to date with what goes over `stream` in plain text. Returns what watches its
 * writes again, after something put its own `write` back.
 */
function watchPlainText(stream: net.Socket, w: Watched): () => void {
  const sent = new Framing(true);
  const received = new Framing(false);
  // Built once: they run for every chunk either way.
  const onSent = (type: number, code: number) => {
    if (type === SYNC || type === QUERY || code === PROTOCOL_3) w.readyOwed++;
    else if (code === TLS_REQUEST || code === GSS_REQUEST) {
      // Answered by one byte; over plain text if refused ('N'), where the startup comes next.
      received.skip(1);
      sent.expectStartup();
    }
  };
  const onReceived = (type: number) => {
    if (type === READY_FOR_QUERY && w.readyOwed > 0) w.readyOwed--;
  };
  const write = stream.write as (chunk: unknown, encoding?: unknown, cb?: unknown) => boolean;
  const watchedWrite = function (this: net.Socket, chunk: unknown, encoding?: unknown, cb?: unknown) {
    w.sentSinceHeard = true;
    if (chunk instanceof Uint8Array) sent.read(chunk, onSent);
    return write.call(this, chunk, encoding, cb);
  } as typeof stream.write;
  stream.write = watchedWrite;
  // postgres.js says goodbye (Terminate) with end(): the server should close; one that stays silent is dropped.
  const end = stream.end;
  stream.end = function (this: net.Socket, ...args: unknown[]) {
    if (args[0] instanceof Uint8Array) w.sentSinceHeard = true;
    return (end as (...a: unknown[]) => net.Socket).apply(this, args);
  } as typeof stream.end;
  stream.on("data", (chunk: Buffer) => {
    w.heard++;
    w.sentSinceHeard = false;
    received.read(chunk, onReceived);
  });
  return () => (stream.write = watchedWrite);
}

/**
 * One direction of the protocol cut into messages: a type byte and a length (the first message
 * a client sends, a length and a code). Only headers are read; bodies are skipped.
 */
class Framing {
  readonly #header = Buffer.alloc(8);
  #gathered = 0;
  #toSkip = 0;
  #untyped: boolean;

  constructor(untypedFirst: boolean) {
    this.#untyped = untypedFirst;
  }

  expectStartup(): void {
    this.#untyped = true;
  }

  skip(bytes: number): void {
    this.#toSkip += bytes;
  }

  /** Calls `each` with every message that begins in `chunk`: its type, or 0 and its code. */
  read(chunk: Uint8Array, each: (type: number, code: number) => void): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.#toSkip > 0) {
        const n = Math.min(this.#toSkip, chunk.length - at);
        this.#toSkip -= n;
        at += n;
        continue;
      }
      const size = this.#untyped ? 8 : 5;
      const n = Math.min(size - this.#gathered, chunk.length - at);
      this.#header.set(chunk.subarray(at, at + n), this.#gathered);
      this.#gathered += n;
      at += n;
      if (this.#gathered < size) return;
      this.#gathered = 0;
      if (this.#untyped) {
        this.#untyped = false;
        this.#toSkip = Math.max(0, this.#header.readInt32BE(0) - 8);
        each(0, this.#header.readInt32BE(4));
      } else {
        this.#toSkip = Math.max(0, this.#header.readInt32BE(1) - 4);
        each(this.#header[0]!, 0);
      }
    }
  }
}
