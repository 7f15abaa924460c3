// An expense approval as a DBOS Transact workflow that pauses for a manager in signalbox.
//
//   POST /expenses ──▶ approveExpense: open the wait (a step) ──▶ DBOS.recv("signalbox") … blocks …
//   signalbox ──callback──▶ POST /signalbox ──▶ DBOS.send(workflow id, event) ──▶ recv returns ──▶ result
//
// DBOS keeps the workflow's progress in Postgres: if this process dies while the workflow waits,
// the next start recovers it, skips the step that opened the wait (its result is checkpointed)
// and blocks in recv again; a message sent meanwhile is waiting for it in the system database.
import http from "node:http";
import { DBOS } from "@dbos-inc/dbos-sdk";
import { createClient, nodeCallbackHandler, type ResumeEvent, type SignalboxEvent } from "@signalbox/client";

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};
const PORT = Number(env("PORT", "9000"));
// Where signalbox can reach this process: the callback URL of every wait it opens.
const PUBLIC_URL = env("PUBLIC_URL", `http://127.0.0.1:${PORT}`);
const CALLBACK_SECRET = env("SIGNALBOX_CALLBACK_SECRET"); // whsec_…, the secret signalbox signs callbacks with
const APPROVAL_TIMEOUT_S = 2 * 24 * 3600;
const TOPIC = "signalbox"; // the DBOS message topic that carries signalbox events to a workflow

const signalbox = createClient({ baseUrl: env("SIGNALBOX_URL", "http://127.0.0.1:8080"), token: env("SIGNALBOX_TOKEN") });

interface Expense {
  id: string;
  employee: string;
  amount: number;
}

/** What signalbox told the workflow: the callback's type, and the signal's payload when one came. */
interface Resumed {
  type: ResumeEvent["type"];
  payload: unknown;
}

export interface ExpenseOutcome {
  expense: Expense;
  status: "approved" | "rejected" | "no answer";
  decision: unknown;
}

async function approveExpenseWorkflow(expense: Expense): Promise<ExpenseOutcome> {
  const workflowId = DBOS.workflowID!;
  // A step, so a recovered workflow does not open the wait again. If the step itself is retried
  // before its checkpoint, the wait's `key` makes signalbox return the same wait.
  await DBOS.runStep(
    () =>
      signalbox.waits.open(workflowId, {
        signal: "expense-approval",
        key: "approval",
        timeout_s: APPROVAL_TIMEOUT_S,
        callback_url: `${PUBLIC_URL}/signalbox`,
        metadata: { expense_id: expense.id, employee: expense.employee, amount: String(expense.amount) },
      }),
    { name: "openApprovalWait" },
  );
  DBOS.logger.info(`expense ${expense.id}: waiting for approval`);
  // Durable: the deadline is recorded, so a recovered workflow waits only for what is left.
  // signalbox times the wait out first and says so (signal.timeout); this margin only guards
  // against that callback never coming.
  const resumed = await DBOS.recv<Resumed>(TOPIC, { timeoutSeconds: APPROVAL_TIMEOUT_S + 3600 });
  if (resumed?.type !== "signal.received") return { expense, status: "no answer", decision: null };
  const decision = resumed.payload as { approved: boolean };
  return { expense, status: decision.approved ? "approved" : "rejected", decision };
}
const approveExpense = DBOS.registerWorkflow(approveExpenseWorkflow, { name: "approveExpense" });

// The callback: signalbox POSTs here when a wait leaves `waiting`; the handler has verified the
// signature first. The run id is the workflow id, so the event goes straight to its recv.
// signalbox delivers at least once; the event id as DBOS's idempotency key makes a repeat a no-op.
async function onEvent(event: SignalboxEvent): Promise<void> {
  if (event.type !== "signal.received" && event.type !== "signal.timeout" && event.type !== "signal.cancelled") return;
  const message: Resumed = { type: event.type, payload: event.wait.result?.payload ?? null };
  await DBOS.send(event.wait.run_id, message, TOPIC, event.id);
}

DBOS.setConfig({ name: "signalbox-expenses", systemDatabaseUrl: env("DBOS_SYSTEM_DATABASE_URL") });
await DBOS.launch(); // creates or migrates the system database, then recovers workflows left pending

await signalbox.signalTypes.put("expense-approval", {
  description: "A manager approves or rejects an expense",
  schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" }, approver: { type: "string" }, comment: { type: "string" } } },
  auth: { scheme: "none" }, // real senders sign: { scheme: "standard-webhooks", secrets: ["whsec_…"] }
});

const handleCallback = nodeCallbackHandler({ secret: CALLBACK_SECRET, onEvent });

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url ?? "/", PUBLIC_URL);
  try {
    if (req.method === "POST" && url.pathname === "/signalbox") return void (await handleCallback(req, res));
    if (req.method === "POST" && url.pathname === "/expenses") {
      const expense = JSON.parse(await readBody(req)) as Expense;
      // The workflow id names the run in signalbox too. Starting the same id again is a no-op.
      const handle = await DBOS.startWorkflow(approveExpense, { workflowID: `expense-${expense.id}` })(expense);
      return json(res, 202, { workflow_id: handle.workflowID });
    }
    const match = /^\/expenses\/([^/]+)$/.exec(url.pathname);
    if (req.method === "GET" && match) {
      const status = await DBOS.getWorkflowStatus(`expense-${decodeURIComponent(match[1]!)}`);
      return status ? json(res, 200, { status: status.status, result: status.output ?? null }) : json(res, 404, { error: "no such expense" });
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

server.listen(PORT, "127.0.0.1", () => console.log(`DBOS example listening on ${PUBLIC_URL}`));

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    server.close();
    void DBOS.shutdown();
  });
}
