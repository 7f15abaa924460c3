import net from "node:net";
import { afterAll } from "vitest";
import type { PrivatePostgres } from "./private-postgres.ts";
import { serviceOnOwnPostgres } from "./own-postgres-service.ts";
import type { ServiceProcess } from "./service-process.ts";

/**
 * A TCP proxy in front of Postgres that can make chosen connections go silent (a network cut or
 * a failover: the sockets stay open, nothing more arrives either way), picked by the
 * application_name of their start-up message. Unlike SIGSTOP of a backend it can also catch a
 * connection opened later, right after its start-up completed (its first ReadyForQuery).
 */
export interface SilencingProxy {
  port: number;
  /** Silences every open connection whose application_name starts with `prefix`; returns how many. */
  silence(prefix: string): number;
  /** Connections opened from now on whose application_name starts with `prefix` go silent right after their start-up (undefined: none). */
  silenceNew(prefix: string | undefined): void;
  /** How many connections went silent right after their start-up so far. */
  silencedAfterStartup(): number;
  /** How many silent connections whose application_name starts with `prefix` the client still holds open. */
  silentOpen(prefix: string): number;
  close(): Promise<void>;
}

interface Conn {
  client: net.Socket;
  server: net.Socket;
  app: string | undefined;
  silent: boolean;
}

export async function startSilencingProxy(target: { host: string; port: number }): Promise<SilencingProxy> {
  const conns = new Set<Conn>();
  let newPrefix: string | undefined;
  let afterStartup = 0;
  const proxy = net.createServer((client) => {
    const server = net.connect(target.port, target.host);
    const conn: Conn = { client, server, app: undefined, silent: false };
    conns.add(conn);
    let startup = Buffer.alloc(0);
    let silenceAtReady = false;
    let serverBuf: Buffer | undefined = Buffer.alloc(0); // parsed until the first ReadyForQuery
    client.on("data", (d: Buffer) => {
      if (conn.app === undefined) {
        startup = Buffer.concat([startup, d]);
        const at = startup.indexOf("application_name\0");
        if (at >= 0) {
          const from = at + "application_name\0".length;
          const end = startup.indexOf(0, from);
          if (end >= 0) {
            conn.app = startup.subarray(from, end).toString("utf8");
            if (newPrefix !== undefined && conn.app.startsWith(newPrefix)) silenceAtReady = true;
          }
        } else if (startup.length >= 8 && startup.length >= startup.readUInt32BE(0)) conn.app = "";
      }
      if (!conn.silent) server.write(d);
    });
    server.on("data", (d: Buffer) => {
      if (conn.silent) return;
      if (serverBuf === undefined || !silenceAtReady) return void client.write(d);
      serverBuf = Buffer.concat([serverBuf, d]);
      let off = 0;
      while (serverBuf.length - off >= 5) {
        const len = serverBuf.readUInt32BE(off + 1);
        if (serverBuf.length - off < 1 + len) break;
        const type = serverBuf[off];
        off += 1 + len;
        if (type === 0x5a) {
          // ReadyForQuery: the start-up is complete. Forward it, then nothing more.
          client.write(serverBuf.subarray(0, off));
          serverBuf = undefined;
          conn.silent = true;
          afterStartup++;
          return;
        }
      }
      client.write(serverBuf.subarray(0, off));
      serverBuf = serverBuf.subarray(off);
    });
    const end = () => {
      conns.delete(conn);
      client.destroy();
      server.destroy();
    };
    client.on("error", end).on("close", end);
    server.on("error", end).on("close", end);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    port: (proxy.address() as net.AddressInfo).port,
    silence(prefix) {
      let n = 0;
      for (const c of conns) if (c.app?.startsWith(prefix) && !c.silent) ((c.silent = true), n++);
      return n;
    },
    silenceNew(prefix) {
      newPrefix = prefix;
    },
    silencedAfterStartup: () => afterStartup,
    silentOpen: (prefix) => [...conns].filter((c) => c.silent && c.app?.startsWith(prefix)).length,
    async close() {
      for (const c of conns) (c.client.destroy(), c.server.destroy());
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

/** signalbox on a Postgres of its own (serviceOnOwnPostgres), every connection through a silencing proxy. */
export function serviceBehindSilencingProxy(name: string, env: Record<string, string> = {}): { pg: PrivatePostgres; svc: ServiceProcess; proxy: SilencingProxy } {
  const own = serviceOnOwnPostgres(name, env, async (pg) => {
    const u = new URL(pg.url);
    withProxy.proxy = await startSilencingProxy({ host: u.hostname, port: Number(u.port) });
    u.port = String(withProxy.proxy.port);
    return u.toString();
  });
  const withProxy = own as typeof own & { proxy: SilencingProxy };
  afterAll(async () => {
    await withProxy.proxy?.close();
  });
  return withProxy;
}
