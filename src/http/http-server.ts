import { createServer, type Server } from "node:http";
import { getRequestListener } from "@hono/node-server";
import { limitConnections, serverOptions, type ConnectionLimits } from "./connection-limits.ts";
import { unreadableRequest } from "./problem.ts";

/**
 * The app's HTTP server, made as @hono/node-server's serve() makes it, with the connection
 * limits, and with an error handler serve() does not pass on: a request it cannot make a Request
 * of (a Host header or target that makes no URL) is answered as a problem, not a bare 400.
 * Listening begins at once: the caller awaits "listening" or "error".
 */
export function startHttpServer(
  fetch: (request: Request) => Response | Promise<Response>,
  opts: { port: number; hostname: string; limits: ConnectionLimits },
): { server: Server; connections: { open(address: string): number } } {
  const server = createServer(serverOptions(opts.limits), getRequestListener(fetch, { hostname: opts.hostname, errorHandler: unreadableRequest }));
  const connections = limitConnections(server, opts.limits);
  server.listen(opts.port, opts.hostname);
  return { server, connections };
}
