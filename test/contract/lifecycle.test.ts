import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { openWait } from "../helpers/http.ts";
import { killServices, startService } from "../helpers/service-process.ts";
import { API_KEY, createTestDatabase, startTestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

const auth = { authorization: `Bearer ${API_KEY}` };

describe("/readyz", () => {
  it("is 200 while the database and the job worker are up, 503 when the worker stops", async () => {
    const app = await startTestApp();
    try {
      const up = await fetch(`${app.baseUrl}/readyz`);
      expect(up.status).toBe(200);
      expect(await up.json()).toEqual({ status: "ok", checks: { database: true, worker: true } });
      await app.worker!.stop();
      const down = await fetch(`${app.baseUrl}/readyz`);
      expect(down.status).toBe(503);
      expect(await down.json()).toEqual({ status: "unavailable", checks: { database: true, worker: false } });
      expect((await fetch(`${app.baseUrl}/healthz`)).status).toBe(200); // the process itself is fine
    } finally {
      await app.close();
    }
  });

  it("is 503 within a few seconds when the database goes away", async () => {
    const db = await createTestDatabase();
    const app = await startTestApp({ databaseUrl: db.url, worker: false });
    try {
      expect((await fetch(`${app.baseUrl}/readyz`)).status).toBe(503); // no worker here: 503 already, but database true
      const name = new URL(db.url).pathname.slice(1);
      const admin = postgres(db.url.replace(`/${name}`, "/postgres"), { max: 1, onnotice: () => {} });
      await admin.unsafe(`drop database ${name} with (force)`);
      await admin.end();
      const started = Date.now();
      const res = await fetch(`${app.baseUrl}/readyz`);
      expect(res.status).toBe(503);
      expect(((await res.json()) as { checks: { database: boolean } }).checks.database).toBe(false);
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      await app.close().catch(() => {});
      await db.drop();
    }
  });
});

describe("SIGTERM", () => {
  afterAll(() => killServices());

  // The embedded data dir is named so a start without DATABASE_URL could never reach the shared one.
  const start = (databaseUrl: string) => startService({ DATABASE_URL: databaseUrl, SIGNALBOX_DATA_DIR: ".test-pg/lifecycle" });

  it("answers a held long-poll with the current state, stops, and exits 0 within 10 s", async () => {
    const db = await createTestDatabase();
    try {
      const svc = await start(db.url);
      expect((await svc.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);
      const { body: wait } = await openWait(svc, "r", { signal: "approval" }, 201);
      const held = fetch(`${svc.baseUrl}/waits/${wait.id}?wait_s=60`, { headers: auth }).then(async (r) => ({ status: r.status, body: (await r.json()) as { status: string } }));
      // The one sleep here: nothing outside the process shows that a long-poll is held (no gauge of
      // held requests on /metrics), so give the request time to reach the server and park.
      await new Promise((r) => setTimeout(r, 300));
      const sent = Date.now();
      svc.child.kill("SIGTERM");
      expect(await held).toEqual({ status: 200, body: expect.objectContaining({ status: "waiting" }) });
      expect(await svc.exited).toBe(0);
      expect(Date.now() - sent).toBeLessThan(10_000);
      expect(svc.output()).toContain('"msg":"stopped"');
    } finally {
      await db.drop();
    }
  }, 60_000);

  it("a second signal forces the exit", async () => {
    const db = await createTestDatabase();
    try {
      const svc = await start(db.url);
      // A job in flight keeps the graceful stop busy (it waits for running jobs).
      let deliveries = 0;
      const hang = createServer(() => void deliveries++);
      await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
      const hook = `http://127.0.0.1:${(hang.address() as AddressInfo).port}/`;
      expect((await svc.api("/signal-types/approval", { method: "PUT", json: { auth: { scheme: "none" } } })).status).toBe(201);
      await openWait(svc, "r", { signal: "approval", callback_url: hook }, 201);
      expect((await fetch(`${svc.baseUrl}/signals/r/approval`, { method: "POST", body: "{}" })).status).toBe(202);
      await waitFor("the delivery to reach the hung engine", () => deliveries > 0);
      svc.child.kill("SIGTERM");
      await waitFor("the log line \"shutting down\"", () => svc.output().includes("shutting down"));
      svc.child.kill("SIGTERM");
      expect(await svc.exited).toBe(1);
      hang.closeAllConnections();
      hang.close();
      expect(svc.output()).toContain("second signal");
    } finally {
      await db.drop();
    }
  }, 60_000);
});
