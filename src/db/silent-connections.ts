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

interface Watched {
  read: number;
  written: number;
  /** When bytes written after the last answer were first seen (0: none outstanding). */
  since: number;
}

/**
 * The sockets of one pool (postgres.js's `socket` option), each destroyed once bytes were
 * written to it and nothing came back for `silentAfterMs`. A connection left open and silent (a
 * failover or a network cut leaves it so, with no error and no reset) would otherwise hold every
 * query sent to it for good, and the pool would keep it: TCP keep-alive does not notice while
 * the peer's kernel still acknowledges, and postgres.js has no timeout for a query. Destroyed,
 * its queries fail as a closed connection (503, retried), and the pool opens a new one.
 *
 * Judged by byte counts of the TCP socket, taken at each answer: what was written after the
 * last answer awaits one. Pipelined queries written before an answer to an earlier one count as
 * answered, so a connection that went silent between the two is found at the next query sent to
 * it. Under TLS the socket emits no events of its own (TLS reads it): the counts are then taken
 * every CHECK_EVERY_MS, and writes in the same look as an answer count as answered too.
 */
export function guardedSockets(silentAfterMs = SILENT_AFTER_MS): (options: { host: string[]; port: number[]; path?: string | false }) => net.Socket {
  const watched = new Map<net.Socket, Watched>();
  let timer: NodeJS.Timeout | undefined;
  let attempt = 0;

  const check = () => {
    const now = performance.now();
    for (const [socket, w] of watched) {
      if (socket.destroyed) watched.delete(socket);
      else if (answered(socket, w)) continue;
      else if (now - (w.since ||= now) >= silentAfterMs) {
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
    // Not once postgres.js let go of it (a pool ended meanwhile): connect() would bring a destroyed
    // socket back to life, with nobody listening for its error (an uncaught exception).
    setImmediate(() => socket.destroyed || (path ? socket.connect(path) : socket.connect(options.port[i]!, options.host[i]!)));
    Object.assign(socket, { host: options.host[i], port: options.port[i] }); // postgres.js reads them (TLS server name, error messages)
    const w: Watched = { read: 0, written: 0, since: 0 };
    watched.set(socket, w);
    socket.on("data", () => answered(socket, w));
    timer ??= setInterval(check, CHECK_EVERY_MS).unref();
    return socket;
  };
}

/** Whether nothing written to `socket` awaits an answer (updating what was seen). */
function answered(socket: net.Socket, w: Watched): boolean {
  if (socket.bytesRead !== w.read) {
    w.read = socket.bytesRead;
    w.written = socket.bytesWritten;
    w.since = 0;
    return true;
  }
  return socket.bytesWritten === w.written;
}
