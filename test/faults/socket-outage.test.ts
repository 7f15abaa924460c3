import fs from "node:fs/promises";
import path from "node:path";
import { expect, it } from "vitest";
import { serviceOnOwnPostgres } from "../helpers/own-postgres-service.ts";
import { answers200 } from "../helpers/service-process.ts";

// DATABASE_URL naming a Unix socket (?host=/dir, README): while Postgres is stopped (no socket
// file: ENOENT) every endpoint answers 503 within 2 s, and after it starts again the service
// comes back by itself.

const own = serviceOnOwnPostgres("sock-outage", {}, async (pg) => {
  const dir = path.resolve(".test-pg", `sock-outage-${process.pid}`);
  await fs.appendFile(path.join(dir, "postgresql.conf"), `\nunix_socket_directories = '${dir}'\n`);
  await pg.restart("fast");
  const u = new URL(pg.url);
  u.searchParams.set("host", dir);
  u.searchParams.set("sslmode", "disable");
  return u.toString();
});

it("over the socket: 503 within 2 s while Postgres is stopped, and back after it starts", async () => {
  const { pg, svc } = own;
  expect((await svc.api("/runs/r1/waits", { method: "POST", json: { signal: "approval" } })).status).toBe(201);
  await pg.stop("fast");
  const answers: Array<{ status: number; ms: number }> = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    const status = await svc.api("/waits?limit=1", { timeoutMs: 10_000 }).then((r) => r.status, () => 0);
    answers.push({ status, ms: Math.round(performance.now() - t) });
  }
  const down = await svc.api("/waits?limit=1");
  const problem = { status: down.status, retryAfter: down.headers.get("retry-after"), body: (await down.text()).slice(0, 300) };
  const ready = (await svc.api("/readyz")).status;
  await pg.start();
  await answers200(svc, "/readyz", 20_000);
  const res = await svc.api("/signals/r1/approval", { method: "POST", json: { ok: true } });
  expect(res.status, await res.text()).toBe(202);
  expect({ bad: answers.filter((a) => a.status !== 503 || a.ms > 2_000), problem, ready }).toEqual({ bad: [], problem: expect.objectContaining({ status: 503 }), ready: 503 });
}, 120_000);
