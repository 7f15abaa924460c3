import { beforeAll, describe, expect, it } from "vitest";
import { createClient } from "../../packages/client/src/index.ts";
import type { ServiceProcess } from "../../test/helpers/service-process.ts";
import { API_KEY, database, freePort, startExample, startSignalbox, waitFor, type ExampleProcess } from "./helpers.ts";

// examples/dbos: a DBOS workflow opens a wait, blocks in DBOS.recv, and resumes when the callback
// handler calls DBOS.send; it survives the engine's process dying while it waits.
describe("DBOS Transact example", () => {
  let svc: ServiceProcess;
  let signalbox: ReturnType<typeof createClient>;
  let env: Record<string, string>;
  let base: string;
  let example: ExampleProcess;

  const start = async () => {
    example = startExample("dbos", "src/main.ts", svc, env);
    await example.printed("listening on");
  };

  beforeAll(async () => {
    svc = await startSignalbox();
    signalbox = createClient({ baseUrl: svc.baseUrl, token: API_KEY });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // DBOS's system database (its workflows, steps and messages): an empty database of its own on the same Postgres.
    env = { DBOS_SYSTEM_DATABASE_URL: await database({ empty: true }), PORT: String(port) };
    await start();
  });

  const expense = async (id: string) => (await fetch(`${base}/expenses/${id}`)).json() as Promise<{ status: string; result: { status: string; decision: unknown } | null }>;

  it("resumes the workflow with the signal's payload, also after the engine restarted while it waited", async () => {
    expect((await fetch(`${base}/expenses`, { method: "POST", body: JSON.stringify({ id: "e-5", employee: "ana", amount: 180 }) })).status).toBe(202);
    const opened = await waitFor("the workflow's wait to open", () => signalbox.waits.find({ signal: "expense-approval", status: "waiting", metadata: { expense_id: "e-5" } }), {
      until: (page) => page.items.length === 1,
      context: example.output,
    });
    expect(opened.items[0]!.run_id).toBe("expense-e-5");
    expect((await expense("e-5")).status).toBe("PENDING");

    // The engine dies while the workflow waits; the next start recovers it from Postgres.
    example.child.kill("SIGKILL");
    await example.exited;
    await start();

    const payload = { approved: true, approver: "kim", comment: "conference travel" };
    expect((await signalbox.signals.send("expense-e-5", "expense-approval", payload)).outcome).toBe("received");
    const done = await waitFor("the workflow to finish", () => expense("e-5"), { until: (e) => e.status === "SUCCESS", timeoutMs: 30_000, context: example.output });
    expect(done.result).toMatchObject({ status: "approved", decision: payload });
    // One wait for the whole workflow: the recovered run did not open a second one.
    expect((await signalbox.waits.ofRun("expense-e-5")).items).toHaveLength(1);
  });

  it("ends the workflow when the wait ends without a signal", async () => {
    await fetch(`${base}/expenses`, { method: "POST", body: JSON.stringify({ id: "e-6", employee: "ana", amount: 90_000 }) });
    const opened = await waitFor("the wait to open", () => signalbox.waits.find({ signal: "expense-approval", status: "waiting", metadata: { expense_id: "e-6" } }), {
      until: (page) => page.items.length === 1,
    });
    // Cancelled, as an operator would (a timed-out wait goes the same way: signal.timeout).
    await signalbox.waits.cancel(opened.items[0]!.id);
    const done = await waitFor("the workflow to finish", () => expense("e-6"), { until: (e) => e.status === "SUCCESS", timeoutMs: 30_000, context: example.output });
    expect(done.result).toMatchObject({ status: "no answer", decision: null });
  });
});
