import type { Server, ServerOptions } from "node:http";
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
  /** Open connections at most; past it new ones are closed at once (the process keeps file descriptors to serve). */
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
 */
export function limitConnections(server: Server, limits: ConnectionLimits): { open(address: string): number } {
  server.maxConnections = limits.maxConnections;
  const perAddress = new Map<string, number>();
  server.on("connection", function capPerAddress(socket: Socket) {
    const address = socket.remoteAddress ?? "";
    if (isTrusted(limits.proxies, address)) return;
    const open = (perAddress.get(address) ?? 0) + 1;
    if (open > limits.maxConnectionsPerAddress) {
      socket.destroy();
      return;
    }
    perAddress.set(address, open);
    socket.once("close", () => {
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
    });
  });
  return { open: (address) => perAddress.get(address) ?? 0 };
}
