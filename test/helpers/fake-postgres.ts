import net from "node:net";

/** AuthenticationOk, BackendKeyData, ReadyForQuery (idle): a Postgres start-up, complete. */
const STARTED = Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x4b, 0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0x5a, 0, 0, 0, 5, 0x49]);

/**
 * A server that completes every client's Postgres start-up (trust) and then does what
 * `afterStartup` says with the connection: never answer, close at the first query... The
 * faults a real server shows only by chance (a restart closing connections it just accepted).
 */
export async function startFakePostgres(afterStartup: (socket: net.Socket) => void): Promise<{ url: string; close(): void }> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    s.on("error", () => {});
    s.once("data", () => {
      s.write(STARTED);
      afterStartup(s);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `postgres://u@127.0.0.1:${(server.address() as net.AddressInfo).port}/db`,
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}
