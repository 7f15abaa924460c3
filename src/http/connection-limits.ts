import type { IncomingMessage, Server, ServerOptions, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { BlockList } from "node:net";
import type { Config } from "../config.ts";
import { isTrusted, proxyList } from "./rate-limit.ts";

export interface ConnectionLimits {
  /** Seconds a client may take to send its request headers. */
  headersTimeoutS: number;
  /** Seconds a client may take to send its whole request, body included (responses are not bounded: long-polls). */
  requestTimeoutS: number;
  /** Seconds an idle keep-alive connection is kept. */
  keepAliveTimeoutS: number;
  /** Open connections at most; past it a new one replaces the oldest not being answered, or is closed (the process keeps file descriptors to serve). */
  maxConnections: number;
  /** Open connections one client address may hold; past it its new ones are closed at once. */
  maxConnectionsPerAddress: number;
  /** Proxies that carry many clients' connections: not held to the per-address cap. */
  proxies: BlockList;
}

/** The limits as configured (SIGNALBOX_HEADERS_TIMEOUT_S, …, SIGNALBOX_TRUSTED_PROXIES). */
export function connectionLimits(config: Config): ConnectionLimits {
  return {
    headersTimeoutS: config.SIGNALBOX_HEADERS_TIMEOUT_S,
    requestTimeoutS: config.SIGNALBOX_REQUEST_TIMEOUT_S,
    keepAliveTimeoutS: config.SIGNALBOX_KEEP_ALIVE_TIMEOUT_S,
    maxConnections: config.SIGNALBOX_MAX_CONNECTIONS,
    maxConnectionsPerAddress: config.SIGNALBOX_MAX_CONNECTIONS_PER_ADDRESS,
    proxies: proxyList(config.SIGNALBOX_TRUSTED_PROXIES),
  };
}

/**
 * The timeouts, given when the server is created: Node looks for requests past them only every
 * `connectionsCheckingInterval` (30 s by default), so that follows the shortest of them.
 */
export function serverOptions(limits: ConnectionLimits): ServerOptions {
  return {
    headersTimeout: limits.headersTimeoutS * 1000,
    requestTimeout: limits.requestTimeoutS * 1000,
    keepAliveTimeout: limits.keepAliveTimeoutS * 1000,
    connectionsCheckingInterval: Math.min(1000, (limits.headersTimeoutS * 1000) / 2),
  };
}

/**
 * Bounds what slow or numerous clients can hold: Node's defaults keep a slow body for 300 s and
 * accept connections until file descriptors run out, when even /healthz fails. One client
 * address may hold only its share, so a slow-loris from one place leaves the rest answering.
 * (The timeouts come with `serverOptions` at creation.)
 *
 * At the cap, a new connection is not refused: the oldest connection that is not being answered
 * (still sending its request, or idle between requests) the longest is closed for it. Slow clients from
 * enough addresses (ten at the defaults) would otherwise fill the cap, and then nothing, not
 * even a probe, gets in; a slow client is old by nature, an honest request is not. Requests
 * being answered (long-polls, event streams: capped on their own) are never closed for this.
 */
export function limitConnections(server: Server, limits: ConnectionLimits): { open(address: string): number } {
  // Node refuses past this before any listener sees the connection: room above the cap, for
  // the moment between a connection's arrival and the close of the one it replaces.
  server.maxConnections = limits.maxConnections + EVICTION_HEADROOM;
  const perAddress = new Map<string, number>();
  /**
   * Every open connection with the request it is being answered for, if any; in the order of
   * their last change (connected, a request arrived, an answer ended), so the first unanswered
   * one has waited longest: a keep-alive connection that was just answered goes last.
   */
  const open = new Map<Socket, { req?: IncomingMessage }>();
  const touch = (socket: Socket, conn: { req?: IncomingMessage }) => {
    if (!open.delete(socket)) return;
    open.set(socket, conn);
  };
  server.on("request", function markAnswering(req: IncomingMessage, res: ServerResponse) {
    const conn = open.get(req.socket);
    if (!conn) return;
    conn.req = req;
    touch(req.socket, conn);
    res.once("finish", () => {
      if (conn.req !== req) return;
      conn.req = undefined;
      touch(req.socket, conn);
    });
  });
  server.on("connection", function capConnections(socket: Socket) {
    const address = socket.remoteAddress ?? "";
    if (!isTrusted(limits.proxies, address)) {
      const fromAddress = (perAddress.get(address) ?? 0) + 1;
      if (fromAddress > limits.maxConnectionsPerAddress) {
        socket.destroy();
        return;
      }
      perAddress.set(address, fromAddress);
      socket.once("close", () => {
        const left = (perAddress.get(address) ?? 1) - 1;
        if (left > 0) perAddress.set(address, left);
        else perAddress.delete(address);
      });
    }
    if (open.size >= limits.maxConnections && !evictOldestUnanswered(open)) {
      socket.destroy();
      return;
    }
    open.set(socket, {});
    socket.once("close", () => open.delete(socket));
  });
  return { open: (address) => perAddress.get(address) ?? 0 };
}

const EVICTION_HEADROOM = 64;

/** Closes the oldest connection whose request is not complete (or that has none); false if every one is being answered. */
function evictOldestUnanswered(open: Map<Socket, { req?: IncomingMessage }>): boolean {
  for (const [socket, conn] of open) {
    if (conn.req?.complete) continue;
    open.delete(socket);
    socket.destroy();
    return true;
  }
  return false;
}
