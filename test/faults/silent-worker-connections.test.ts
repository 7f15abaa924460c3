import { afterAll, beforeAll, expect, it } from "vitest";
import { startCallbackReceiver } from "../helpers/callback-receiver.ts";
import { serviceOnOwnPostgres } from "../helpers/own-postgres-service.ts";
import type { PrivatePostgres } from "../helpers/private-postgres.ts";
import { answers200, type ServiceProcess } from "../helpers/service-process.ts";
import { waitFor } from "../helpers/wait-for.ts";

// A failover or a network cut can leave the connections a process holds open and silent (no
// error, no reset) while new connections work. Here the job runners' backends are stopped
// (SIGSTOP) and the postmaster is not: the runners must notice that they no longer reach the
// database and start again on new connections, so timeouts and callbacks flow again.

const own = serviceOnOwnPostgres("silent-worker", { SIGNALBOX_WORKER_STALE_S: "3" });
let pg: PrivatePostgres;
let svc: ServiceProcess;
let engine: Awaited<ReturnType<typeof startCallbackReceiver>>;

beforeAll(async () => {
  ({ pg, svc } = own);
  engine = await startCallbackReceiver();
});

afterAll(async () => {
  await engine?.close();
});

async function openWait(run: string, body: Record<string, unknown>): Promise<string> {
  const res = await svc.api(`/runs/${run}/waits`, { method: "POST", json: { signal: "approval", callback_url: engine.url, ...body } });
  expect(res.status).toBe(201);
  return ((await res.json()) as { id: string }).id;
}

it("job runners whose connections went silent start again on new ones: callbacks and timeouts flow", async () => {
  const signalled = await openWait("silent-a", {});
  const timed = await openWait("silent-b", { timeout_s: 3 });
  expect(await pg.freezeBackends("signalbox-worker")).toBeGreaterThan(0);

  expect((await fetch(`${svc.baseUrl}/signals/silent-a/approval`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(202);
  const delivered = (id: string) => engine.received.find((cb) => (cb.json as { wait: { id: string } }).wait.id === id);
  await waitFor("the signalled wait's callback", () => delivered(signalled), { timeoutMs: 40_000 });
  const timeout = await waitFor("the timed-out wait's callback", () => delivered(timed), { timeoutMs: 40_000 });
  expect((timeout!.json as { type: string }).type).toBe("signal.timeout");

  await answers200(svc, "/readyz", 10_000);
  const parts = ((await (await svc.api("/readyz?verbose")).json()) as { parts: Record<string, unknown> }).parts;
  expect(parts).toMatchObject({ worker_polling: true });
  expect(Number(parts.worker_restarts)).toBeGreaterThanOrEqual(1);
  const restarted = svc.logs().filter((l) => l.level === 50).map((l) => String(l.msg));
  expect(restarted.some((m) => m.includes("no look for jobs reached the database")), JSON.stringify(restarted)).toBe(true);
}, 120_000);
