import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import postgres from "postgres";
import { afterAll, describe, expect, it } from "vitest";
import { freePort } from "../../src/core/free-port.ts";
import { API_KEY, createTestDatabase, startTestApp } from "../helpers/test-app.ts";

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
  const children: ChildProcess[] = [];
  afterAll(() => children.forEach((c) => c.kill("SIGKILL")));

  async function start(databaseUrl: string) {
    const port = await freePort();
    const child = spawn(process.execPath, ["src/main.ts"], {
      env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), SIGNALBOX_API_KEYS: API_KEY, LOG_LEVEL: "info", SIGNALBOX_DATA_DIR: ".test-pg/lifecycle" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    let output = "";
    child.stdout!.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr!.on("data", (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const deadline = Date.now() + 30_000;
    while (!output.includes("signalbox listening")) {
      if (Date.now() > deadline) throw new Error(`did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    return { child, base: `http://127.0.0.1:${port}`, exited, output: () => output };
  }

  it("answers a held long-poll with the current state, stops, and exits 0 within 10 s", async () => {
    const db = await createTestDatabase();
    try {
      const svc = await start(db.url);
      await fetch(`${svc.base}/signal-types/approval`, { method: "PUT", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ auth: { scheme: "none" } }) });
      const wait = (await (await fetch(`${svc.base}/runs/r/waits`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: '{"signal":"approval"}' })).json()) as { id: string };
      const held = fetch(`${svc.base}/waits/${wait.id}?wait_s=60`, { headers: auth }).then(async (r) => ({ status: r.status, body: (await r.json()) as { status: string } }));
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
      const hang = createServer(() => {});
      await new Promise<void>((r) => hang.listen(0, "127.0.0.1", r));
      const hook = `http://127.0.0.1:${(hang.address() as AddressInfo).port}/`;
      const json = { ...auth, "content-type": "application/json" };
      await fetch(`${svc.base}/signal-types/approval`, { method: "PUT", headers: json, body: JSON.stringify({ auth: { scheme: "none" } }) });
      await fetch(`${svc.base}/runs/r/waits`, { method: "POST", headers: json, body: JSON.stringify({ signal: "approval", callback_url: hook }) });
      await fetch(`${svc.base}/signals/r/approval`, { method: "POST", body: "{}" });
      await new Promise((r) => setTimeout(r, 500)); // the delivery is now waiting on the hung engine
      svc.child.kill("SIGTERM");
      while (!svc.output().includes("shutting down")) await new Promise((r) => setTimeout(r, 10));
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
