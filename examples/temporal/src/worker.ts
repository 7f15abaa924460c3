// The Temporal worker: runs the workflow and the activities. `npm run worker`.
// Needs `npm install @temporalio/worker` (not installed here, so `npm run typecheck` leaves this
// file out; it was checked against @temporalio/worker 1.24).
import { fileURLToPath } from "node:url";
import { NativeConnection, Worker } from "@temporalio/worker";
import { createClient } from "@signalbox/client";
import * as activities from "./activities.ts";
import { TASK_QUEUE } from "./shared.ts";

// What an approval looks like, and who may send it (PUT is idempotent: safe at every start).
await createClient({ baseUrl: process.env.SIGNALBOX_URL ?? "http://127.0.0.1:8080", token: process.env.SIGNALBOX_TOKEN }).signalTypes.put("refund-approval", {
  description: "A manager approves or rejects a refund",
  schema: { type: "object", required: ["approved"], properties: { approved: { type: "boolean" }, approver: { type: "string" } } },
  auth: { scheme: "none" }, // real senders sign: { scheme: "standard-webhooks", secrets: ["whsec_…"] }
});

const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS ?? "127.0.0.1:7233" });
const worker = await Worker.create({
  connection,
  namespace: process.env.TEMPORAL_NAMESPACE ?? "default",
  taskQueue: TASK_QUEUE,
  workflowsPath: fileURLToPath(new URL("./workflows.ts", import.meta.url)),
  activities,
});
await worker.run();
