// The callback endpoint: signalbox POSTs here when a wait leaves `waiting`; each verified event
// becomes a Temporal signal to the workflow whose id is the wait's run id. `npm run callbacks`.
import http from "node:http";
import { Client, Connection, WorkflowNotFoundError } from "@temporalio/client";
import { nodeCallbackHandler } from "@signalbox/client";
import { signalboxResumed } from "./shared.ts";

const temporal = new Client({
  connection: await Connection.connect({ address: process.env.TEMPORAL_ADDRESS ?? "127.0.0.1:7233" }),
  namespace: process.env.TEMPORAL_NAMESPACE ?? "default",
});

const handler = nodeCallbackHandler({
  secret: process.env.SIGNALBOX_CALLBACK_SECRET!, // whsec_…, the secret signalbox signs callbacks with
  async onEvent(event) {
    if (event.type !== "signal.received" && event.type !== "signal.timeout" && event.type !== "signal.cancelled") return;
    try {
      await temporal.workflow.getHandle(event.wait.run_id).signal(signalboxResumed, {
        eventId: event.id,
        type: event.type,
        payload: event.wait.result?.payload ?? null,
      });
    } catch (err) {
      // The workflow has already finished (this is a repeat of an event it acted on, or it ended
      // some other way): nothing is left to resume, so acknowledge. Anything else throws, the
      // handler answers 500, and signalbox retries with the same event id.
      if (err instanceof WorkflowNotFoundError) return;
      throw err;
    }
  },
});

const port = Number(process.env.PORT ?? 9000);
http.createServer(handler).listen(port, "127.0.0.1", () => console.log(`signalbox callbacks for Temporal on http://127.0.0.1:${port}/signalbox`));
