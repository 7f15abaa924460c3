import net from "node:net";

/**
 * A TCP port free on loopback right now (another process may still take it before use), other
 * than those in `avoid`: ports this process is about to bind itself, which are free until it does.
 */
export async function freePort(avoid: readonly number[] = []): Promise<number> {
  for (;;) {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", resolve);
    });
    const { port } = server.address() as net.AddressInfo;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    if (!avoid.includes(port)) return port;
  }
}
