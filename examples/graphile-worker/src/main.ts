// An order pipeline on graphile-worker that pauses for a manager's approval.
//
//   POST /orders ──▶ request_approval ──(signalbox wait)──▶ POST /signalbox ──▶ fulfil_order ──▶ ship_order
//                                                                          └─▶ cancel_order
//
// graphile-worker has no "sleep until an event" of its own: a job that must wait simply ends,
// and the chain goes on from a new job that the callback enqueues. So no worker slot is held
// while a manager takes two days to answer, and a restart of this process loses nothing: the
// wait lives in signalbox, the next job in Postgres.
import http from "node:http";
import { createClient, nodeCallbackHandler, type SignalboxEvent } from "@signalbox/client";
import { run, type Task } from "graphile-worker";
import pg from "pg";

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const PORT = Number(env("PORT", "9000"));
// Where signalbox can reach this process: the callback URL of every wait it opens.
const PUBLIC_URL = env("PUBLIC_URL", `http://127.0.0.1:${PORT}`);
const CALLBACK_SECRET = env("SIGNALBOX_CALLBACK_SECRET"); // whsec_…, the secret signalbox signs callbacks with

const pool = new pg.Pool({ connectionString: env("DATABASE_URL") });
const signalbox = createClient({ baseUrl: env("SIGNALBOX_URL", "http://127.0.0.1:8080"), token: env("SIGNALBOX_TOKEN") });

// The application's own tables. `handled_callbacks` remembers which signalbox events have been
// acted on: callbacks are delivered at least once, and a repeat must not fulfil an order twice.
await pool.query(`
  create table if not exists orders (
    id text primary key,
    amount numeric not null,
    status text not null,
    wait_id text,
    decided_by text,
    updated_at timestamptz not null default now()
  );
  create table if not exists handled_callbacks (event_id text primary key, handled_at timestamptz not null default now());
`);

// What an approval looks like, and who may send it. Declared at start-up because PUT is
// idempotent; a real deployment might keep this in a file (`signalbox types apply`).
await signalbox.signalTypes.put("manager-approval", {
  description: "A manager approves or rejects an order",
  schema: {
    type: "object",
    required: ["approved", "approver"],
    properties: { approved: { type: "boolean" }, approver: { type: "string" }, comment: { type: "string" } },
  },
  auth: { scheme: "none" }, // real senders sign: { scheme: "standard-webhooks", secrets: ["whsec_…"] }
});

/** Moves an order to `status` (only from `from`, when given); resolves with whether it moved. */
const setStatus = async (id: string, status: string, extra: { wait_id?: string; decided_by?: string; from?: string } = {}) =>
  (
    await pool.query(
      "update orders set status = $2, wait_id = coalesce($3, wait_id), decided_by = coalesce($4, decided_by), updated_at = now() where id = $1 and ($5::text is null or status = $5)",
      [id, status, extra.wait_id ?? null, extra.decided_by ?? null, extra.from ?? null],
    )
  ).rowCount === 1;

interface OrderJob {
  order_id: string;
}

const tasks: Record<string, Task> = {
  // Step 1: ask for approval, then end. The job may be retried (a crash, a timeout): the wait's
  // `key` makes signalbox return the same wait again instead of opening a second one. A retry may
  // also run after the answer came (graphile re-runs a job whose worker died once its lock
  // expires), so the order moves on only from `new`: a shipped order stays shipped.
  async request_approval(payload, helpers) {
    const { order_id } = payload as OrderJob;
    const { rows } = await pool.query<{ amount: string }>("select amount from orders where id = $1", [order_id]);
    const wait = await signalbox.waits.open(`order-${order_id}`, {
      signal: "manager-approval",
      key: "approval",
      timeout_s: 2 * 24 * 3600, // nobody answered in two days: the callback says signal.timeout
      callback_url: `${PUBLIC_URL}/signalbox`,
      metadata: { order_id, amount: rows[0]?.amount ?? null, assignee: "kim" },
    });
    if (!(await setStatus(order_id, "awaiting_approval", { wait_id: wait.id, from: "new" }))) return helpers.logger.info(`order ${order_id}: past awaiting approval already (${wait.id} is ${wait.status})`);
    helpers.logger.info(`order ${order_id}: waiting for approval (${wait.id})`);
  },
  // Step 2a: the manager said yes.
  async fulfil_order(payload, helpers) {
    const { order_id, approver } = payload as OrderJob & { approver: string };
    await setStatus(order_id, "approved", { decided_by: approver });
    await helpers.addJob("ship_order", { order_id }); // the chain goes on, one job per step
  },
  // Step 3.
  async ship_order(payload, helpers) {
    const { order_id } = payload as OrderJob;
    await setStatus(order_id, "shipped");
    helpers.logger.info(`order ${order_id}: shipped`);
  },
  // Step 2b: rejected, timed out, or the run was cancelled in signalbox.
  async cancel_order(payload, helpers) {
    const { order_id, reason, decided_by } = payload as OrderJob & { reason: string; decided_by?: string };
    await setStatus(order_id, `cancelled: ${reason}`, { decided_by });
    helpers.logger.info(`order ${order_id}: cancelled (${reason})`);
  },
};

// The callback: signalbox POSTs here when the approval wait leaves `waiting`. The handler has
// verified the signature over the raw body before this runs (a forged request gets 401).
// Recording the event id and enqueueing the next job happen in one transaction, so a repeat of
// the same event (same id) is acknowledged without enqueueing anything, and a crash between the
// two cannot happen. Throwing answers 500, and signalbox retries later with the same id.
async function onEvent(event: SignalboxEvent): Promise<void> {
  if (event.type !== "signal.received" && event.type !== "signal.timeout" && event.type !== "signal.cancelled") return;
  const orderId = String(event.wait.metadata?.order_id);
  await inTransaction(async (client) => {
    const first = await client.query("insert into handled_callbacks (event_id) values ($1) on conflict do nothing", [event.id]);
    if (first.rowCount === 0) {
      console.log(`callback ${event.id} already handled: acknowledged again, nothing enqueued`);
    } else if (event.type === "signal.received") {
      const decision = event.wait.result?.payload as { approved: boolean; approver: string };
      const [task, payload] = decision.approved
        ? ["fulfil_order", { order_id: orderId, approver: decision.approver }]
        : ["cancel_order", { order_id: orderId, reason: "rejected", decided_by: decision.approver }];
      // graphile_worker.add_job is the SQL face of addJob: it joins this transaction.
      await client.query("select graphile_worker.add_job($1, $2::json)", [task, JSON.stringify(payload)]);
    } else {
      const reason = event.type === "signal.timeout" ? "no answer in time" : "cancelled";
      await client.query("select graphile_worker.add_job('cancel_order', $1::json)", [JSON.stringify({ order_id: orderId, reason })]);
    }
  });
}

/** Runs `work` in one transaction on one pooled connection: committed, or rolled back if it throws. */
async function inTransaction(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query("begin");
    await work(client);
    await client.query("commit");
  } catch (err) {
    await client.query("rollback").catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

// The worker first: it installs graphile-worker's schema, which add_job below needs.
const runner = await run({ pgPool: pool, taskList: tasks, concurrency: 4, noHandleSignals: true });

const handleCallback = nodeCallbackHandler({ secret: CALLBACK_SECRET, onEvent });

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url ?? "/", PUBLIC_URL);
  try {
    if (req.method === "POST" && url.pathname === "/signalbox") return void (await handleCallback(req, res));
    if (req.method === "POST" && url.pathname === "/orders") {
      // A new order and its first job, in one transaction.
      const order = JSON.parse(await readBody(req)) as { id: string; amount: number };
      await inTransaction(async (client) => {
        await client.query("insert into orders (id, amount, status) values ($1, $2, 'new')", [order.id, order.amount]);
        await client.query("select graphile_worker.add_job('request_approval', $1::json)", [JSON.stringify({ order_id: order.id })]);
      });
      return json(res, 202, { id: order.id, status: "new" });
    }
    const match = /^\/orders\/([^/]+)$/.exec(url.pathname);
    if (req.method === "GET" && match) {
      const { rows } = await pool.query("select id, amount, status, wait_id, decided_by from orders where id = $1", [decodeURIComponent(match[1]!)]);
      return rows[0] ? json(res, 200, rows[0]) : json(res, 404, { error: "no such order" });
    }
    json(res, 404, { error: "not found" });
  } catch (err) {
    console.error(err);
    json(res, 500, { error: String(err) });
  }
});

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = "";
    req.setEncoding("utf8").on("data", (c: string) => (body += c)).on("end", () => resolve(body)).on("error", reject);
  });
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

server.listen(PORT, "127.0.0.1", () => console.log(`graphile-worker example listening on ${PUBLIC_URL}`));

// Stop cleanly: no new requests, running jobs finish, then the pool closes.
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    server.close();
    void runner.stop().then(() => pool.end());
  });
}
