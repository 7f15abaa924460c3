// Starts one refund workflow: `node src/start-refund.ts r-9 c-3 75`. Its id doubles as the signalbox run id.
import { Client, Connection } from "@temporalio/client";
import { TASK_QUEUE } from "./shared.ts";
import { refundWorkflow } from "./workflows.ts";

const [id = "r-1", customer = "c-1", amount = "10"] = process.argv.slice(2);
const client = new Client({ connection: await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? "127.0.0.1:7233" }) });
const handle = await client.workflow.start(refundWorkflow, {
  taskQueue: TASK_QUEUE,
  workflowId: `refund-${id}`,
  args: [{ id, customer, amount: Number(amount) }],
});
console.log(`started ${handle.workflowId}; approve it with: signalbox send ${handle.workflowId} refund-approval --data '{"approved": true}'`);
console.log(await handle.result());
