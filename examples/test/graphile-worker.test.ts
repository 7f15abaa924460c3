import postgres from "postgres";
import { beforeAll, describe, expect, it } from "vitest";
import { createClient } from "../../packages/client/src/index.ts";
import { API_KEY, database, freePort, startExample, startSignalbox, waitFor, type ExampleProcess } from "./helpers.ts";

// examples/graphile-worker: a job chain pauses for a manager's approval and resumes on the callback.
describe("graphile-worker example", () => {
  let example: ExampleProcess;
  let base: string;
  let exampleDb: string;
  let signalbox: ReturnType<typeof createClient>;

  beforeAll(async () => {
    const svc = await startSignalbox();
    signalbox = createClient({ baseUrl: svc.baseUrl, token: API_KEY });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // The example keeps its orders and its graphile-worker queue in a database of its own.
    exampleDb = await database({ empty: true });
    example = startExample("graphile-worker", "src/main.ts", svc, { DATABASE_URL: exampleDb, PORT: String(port) });
    await example.printed("listening on");
  });

  const order = async (id: string) => (await fetch(`${base}/orders/${id}`)).json() as Promise<{ status: string; wait_id: string | null; decided_by: string | null }>;
  const orderReaches = (id: string, status: string) =>
    waitFor(`order ${id} to be ${status}`, () => order(id), { until: (o) => o.status === status, timeoutMs: 30_000, context: example.output });

  it("pauses the chain at the approval and finishes it once the manager approves", async () => {
    expect((await fetch(`${base}/orders`, { method: "POST", body: JSON.stringify({ id: "o-17", amount: 420 }) })).status).toBe(202);
    const waiting = await orderReaches("o-17", "awaiting_approval");

    // The chain is parked in signalbox, findable as any pending approval is.
    const pending = await signalbox.waits.find({ signal: "manager-approval", status: "waiting", metadata: { order_id: "o-17" } });
    expect(pending.items.map((w) => w.id)).toEqual([waiting.wait_id]);

    // The manager answers (from a web app, a webhook, `signalbox send`…).
    const sent = await signalbox.signals.send("order-o-17", "manager-approval", { approved: true, approver: "kim" });
    expect(sent.outcome).toBe("received");

    const done = await orderReaches("o-17", "shipped");
    expect(done.decided_by).toBe("kim");
  });

  it("acknowledges a repeated callback without running the next step again", async () => {
    const { wait_id } = await order("o-17");
    // The order ships as soon as the example has handled the callback, which can be before
    // signalbox has recorded the 204; a redelivery asked for meanwhile would be settled by that
    // attempt (it delivered) and send nothing more.
    await waitFor("the first callback to be recorded as delivered", () => signalbox.waits.get(wait_id!), { until: (w) => w.delivery?.status === "delivered" });
    await signalbox.waits.redeliver(wait_id!); // the same event again, same webhook-id
    await example.printed("already handled: acknowledged again, nothing enqueued");
    await waitFor("the redelivery to be delivered", () => signalbox.waits.deliveries(wait_id!), {
      until: (d) => d.items.filter((a) => a.status_code === 204).length === 2,
    });
    expect((await order("o-17")).status).toBe("shipped");
  });

  it("cancels the order when the manager rejects it", async () => {
    await fetch(`${base}/orders`, { method: "POST", body: JSON.stringify({ id: "o-18", amount: 99_000 }) });
    await orderReaches("o-18", "awaiting_approval");
    await signalbox.signals.send("order-o-18", "manager-approval", { approved: false, approver: "kim", comment: "over budget" });
    expect((await orderReaches("o-18", "cancelled: rejected")).decided_by).toBe("kim");
  });

  it("a request_approval job run again after the approval (graphile re-runs one whose worker died) leaves the shipped order shipped", async () => {
    await fetch(`${base}/orders`, { method: "POST", body: JSON.stringify({ id: "o-19", amount: 10 }) });
    await orderReaches("o-19", "awaiting_approval");
    await signalbox.signals.send("order-o-19", "manager-approval", { approved: true, approver: "kim" });
    await orderReaches("o-19", "shipped");

    // The same job again: the wait's key gets it the same wait back, already received.
    const sql = postgres(exampleDb, { max: 1 });
    try {
      await sql`select graphile_worker.add_job('request_approval', ${sql.json({ order_id: "o-19" })}::json)`;
      await waitFor("the job run again to finish", () => sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs`, { until: (r) => r[0]!.n === 0 });
    } finally {
      await sql.end();
    }
    expect((await order("o-19")).status).toBe("shipped");
  });
});
