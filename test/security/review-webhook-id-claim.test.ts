// A refused request changes nothing, not even the standard-webhooks replay receipt: a copy of a
// delivery sent first to another run's URL (its payload names its run through run_pointer) must
// not take the webhook-id away from the genuine delivery to the right run.
import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { expectRefusedUnchanged, openWaitFor, post, putType, runSignals, signStandard, swSecret, waitStatus } from "./support.ts";

const SW = swSecret(3);

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
  await putType(app, "paid", { auth: { scheme: "standard-webhooks", secrets: [SW], run_pointer: "/run" }, buffer_ttl_s: 0 });
});
afterAll(async () => {
  await app?.close();
});

it("a copy sent first to another run's URL is refused (401) and changes nothing: the genuine delivery is then received", async () => {
  const waitId = await openWaitFor(app, "order-1", "paid");
  const body = JSON.stringify({ run: "order-1", amount: 10 });
  const headers = signStandard(SW, body, { id: "msg_poison_1" });
  await expectRefusedUnchanged(app, () => post(app, "order-2", "paid", body, headers)); // no receipt either
  expect((await post(app, "order-1", "paid", body, headers)).status).toBe(202);
  expect(await waitStatus(app, waitId)).toBe("received");
});

it("replay protection still holds once accepted: again to its run is a duplicate, to another run 401 with nothing written", async () => {
  await openWaitFor(app, "order-3", "paid");
  const waitOther = await openWaitFor(app, "order-4", "paid");
  const body = JSON.stringify({ run: "order-3", amount: 5 });
  const headers = signStandard(SW, body, { id: "msg_replay_3" });
  expect((await post(app, "order-3", "paid", body, headers)).status).toBe(202);
  const next = await openWaitFor(app, "order-3", "paid");
  expect((await post(app, "order-3", "paid", body, headers)).body).toMatchObject({ outcome: "duplicate" });
  expect(await waitStatus(app, next)).toBe("waiting");
  await expectRefusedUnchanged(app, () => post(app, "order-4", "paid", body, headers));
  expect(await waitStatus(app, waitOther)).toBe("waiting");
  expect((await runSignals(app, "order-3")).items).toHaveLength(1);
});
