/**
 * The attackers of `npm run bench -- --hostile`, one process each (argv[2]: a JSON `Attack`), so
 * that their work is not the bench's and their sockets are not its file descriptors. Prints one
 * JSON line when done: `{ sent, byStatus, errors, ... }`.
 */
import net from "node:net";
import { randomBytes } from "node:crypto";
import { rawHttpClient } from "./http-client.ts";
import { now } from "./stats.ts";

export type Attack =
  /**
   * Anonymous intake, closed loop: rejections on an `auth: none` type, unknown names, bad
   * signatures, in turn; from one address, or each request from another (`many`).
   */
  | { kind: "flood"; baseUrl: string; concurrency: number; durationMs: number; openType: string; signedType: string; addresses: "one" | "many" }
  /** Up to `count` signals to random unknown signal names, for `durationMs` at most. */
  | { kind: "names"; baseUrl: string; concurrency: number; count: number; durationMs: number }
  /** Signals with a 1 MB payload to runs with no wait on an `auth: none` type. */
  | { kind: "disk"; baseUrl: string; concurrency: number; durationMs: number; openType: string }
  /** 100,000-field forms to a forged approval link, a new connection each. */
  | { kind: "forms"; baseUrl: string; concurrency: number; durationMs: number }
  /** `count` connections from `localAddresses` whose headers or body never finish; reopened when closed. */
  | { kind: "slow"; baseUrl: string; count: number; localAddresses: string[]; durationMs: number };

const attack = JSON.parse(process.argv[2]!) as Attack;
const byStatus: Record<string, number> = {};
let sent = 0;
let errors = 0;
const count = (status: number | string) => (byStatus[status] = (byStatus[status] ?? 0) + 1);
/** Every request from another address (an attacker with many), as a trusted proxy would say. */
const someAddress = () => `10.${randomBytes(3).join(".")}`;
const ONE_ADDRESS = "198.51.100.7";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function loops(concurrency: number, until: () => boolean, op: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (until()) {
        sent++;
        try {
          await op(next++);
        } catch {
          errors++;
        }
      }
    }),
  );
}

async function flood(a: Extract<Attack, { kind: "flood" }>) {
  const send = rawHttpClient(a.baseUrl, {});
  const end = now() + a.durationMs;
  const payload = JSON.stringify({ note: "x".repeat(1000) });
  await loops(a.concurrency, () => now() < end, async (i) => {
    const run = `victim-${i}`;
    const xff = { "x-forwarded-for": a.addresses === "one" ? ONE_ADDRESS : someAddress() };
    const res =
      i % 3 === 0
        ? await send("POST", `/signals/${run}/${a.openType}`, payload, xff)
        : i % 3 === 1
          ? await send("POST", `/signals/${run}/n${randomBytes(8).toString("hex")}`, payload, xff)
          : await send("POST", `/signals/${run}/${a.signedType}`, payload, { ...xff, "x-hub-signature-256": `sha256=${"0".repeat(64)}` });
    count(res.status);
  });
}

async function names(a: Extract<Attack, { kind: "names" }>) {
  const send = rawHttpClient(a.baseUrl, {});
  let started = 0;
  const end = now() + a.durationMs;
  await loops(a.concurrency, () => started++ < a.count && now() < end, async () => {
    count((await send("POST", `/signals/r/n${randomBytes(8).toString("hex")}`, "{}", { "x-forwarded-for": someAddress() })).status);
  });
}

async function disk(a: Extract<Attack, { kind: "disk" }>) {
  const send = rawHttpClient(a.baseUrl, {});
  const end = now() + a.durationMs;
  // Incompressible, so neither TOAST nor the WAL shrink what would be kept whole.
  const payload = JSON.stringify({ blob: randomBytes(750_000).toString("base64") }).slice(0, 1_000_000 - 2) + '"}';
  await loops(a.concurrency, () => now() < end, async (i) => {
    count((await send("POST", `/signals/nobody-${i}/${a.openType}`, payload, { "x-forwarded-for": someAddress() })).status);
  });
}

/** One request on its own connection; resolves with the status, or "closed" when the server hangs up first. */
function oneShot(url: URL, head: string, body: Buffer): Promise<number | string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port) });
    let answer = "";
    socket.on("connect", () => {
      socket.write(head);
      socket.write(body);
    });
    socket.on("data", (d) => (answer += d.toString("latin1")));
    socket.on("error", () => {});
    socket.on("close", () => resolve(answer.startsWith("HTTP/1.1 ") ? Number(answer.slice(9, 12)) : "closed"));
  });
}

async function forms(a: Extract<Attack, { kind: "forms" }>) {
  const url = new URL(a.baseUrl);
  const body = Buffer.from(Array.from({ length: 100_000 }, (_, i) => `f${i}=1`).join("&"));
  const end = now() + a.durationMs;
  await loops(a.concurrency, () => now() < end, async () => {
    const head = `POST /approvals/${randomBytes(24).toString("base64url")} HTTP/1.1\r\nhost: ${url.host}\r\nx-forwarded-for: ${someAddress()}\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: ${body.length}\r\n\r\n`;
    count(await oneShot(url, head, body));
  });
}

async function slow(a: Extract<Attack, { kind: "slow" }>) {
  const url = new URL(a.baseUrl);
  const end = now() + a.durationMs;
  const sockets = new Map<net.Socket, boolean>(); // whether it is still on its headers
  let opened = 0;
  let closedByServer = 0;
  let heldMax = 0;
  const open = (i: number) => {
    if (now() >= end) return;
    const headersOnly = i % 2 === 0;
    const socket = net.connect({ host: url.hostname, port: Number(url.port), localAddress: a.localAddresses[i % a.localAddresses.length] });
    opened++;
    sockets.set(socket, headersOnly);
    socket.on("connect", () =>
      socket.write(
        headersOnly ? `POST /signals/r/s HTTP/1.1\r\nhost: ${url.host}\r\n` : `POST /signals/r/s HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{`,
      ),
    );
    socket.on("error", () => {});
    socket.resume();
    socket.on("close", () => {
      sockets.delete(socket);
      if (now() < end) {
        closedByServer++;
        setTimeout(() => open(i), 5000).unref(); // a slow-loris comes back, though not in a tight loop
      }
    });
  };
  // Open them in batches, so the connects do not all land in one tick.
  for (let i = 0; i < a.count; i++) {
    open(i);
    if (i % 500 === 499) await sleep(50);
  }
  // Trickle: a header line or a body byte now and then, each under the server's timeouts.
  const trickle = setInterval(() => {
    for (const [s, headersOnly] of sockets) if (s.writable && !s.connecting) s.write(headersOnly ? "x-more: 1\r\n" : " ");
  }, 2000);
  while (now() < end) {
    await sleep(500);
    heldMax = Math.max(heldMax, [...sockets.keys()].filter((s) => !s.connecting && !s.destroyed).length);
  }
  clearInterval(trickle);
  for (const s of sockets.keys()) s.destroy();
  return { opened, closedByServer, heldMax };
}

const extra = await (async () => {
  switch (attack.kind) {
    case "flood":
      return flood(attack);
    case "names":
      return names(attack);
    case "disk":
      return disk(attack);
    case "forms":
      return forms(attack);
    case "slow":
      return slow(attack);
  }
})();
process.stdout.write(`${JSON.stringify({ sent, byStatus, errors, ...(extra ?? {}) })}\n`);
process.exit(0);
