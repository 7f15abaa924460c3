import type { ServerType } from "@hono/node-server";

/**
 * Stops accepting connections and resolves once every response in flight has ended. Keep-alive
 * connections are closed as soon as they go idle (a streamed response ending makes its
 * connection idle only then), rather than after the keep-alive timeout.
 */
export async function closeServer(server: ServerType): Promise<void> {
  const s = server as ServerType & { closeIdleConnections?: () => void };
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  s.closeIdleConnections?.();
  const sweep = setInterval(() => s.closeIdleConnections?.(), 50);
  try {
    await closed;
  } finally {
    clearInterval(sweep);
  }
}
