import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver, type ReceivedCallback } from "../helpers/callback-receiver.ts";
import { advanceClock } from "../helpers/clock.ts";
import { openWait as open } from "../helpers/http.ts";
import { drainJobs } from "../helpers/race-gates.ts";
import { waitFor } from "../helpers/wait-for.ts";
import { CALLBACK_SECRET, startTestApp, type TestApp } from "../helpers/test-app.ts";

// notify_url (API.md): a signed `signal.waiting` event when a wait opens, `signal.reminder`
// reminders_s before its deadline, nothing once the wait has left waiting, retried like callbacks.

type Receiver = Awaited<ReturnType<typeof startCallbackReceiver>>;

let app: TestApp;
let inbox: Receiver;
beforeAll(async () => {
  app = await startTestApp();
  inbox = await startCallbackReceiver();
  await declare("needs-review", { auth: { scheme: "none" }, notify_url: inbox.url, reminders_s: [60, 7200] });
  await declare("silent", { auth: { scheme: "none" } });
});
afterAll(async () => {
  await app?.close();
  await inbox?.close();
});

async function declare(name: string, body: Record<string, unknown>) {
  const res = await app.api(`/signal-types/${name}`, { method: "PUT", json: body });
  expect([200, 201], await res.clone().text()).toContain(res.status);
}

async function openWait(run: string, spec: Record<string, unknown>): Promise<{ id: string; created_at: string; timeout_at: string | null }> {
  return (await open(app, run, spec, 201)).body;
}

/** Verified with the standardwebhooks library and the engine's copy of the secret. */
function verified(cb: ReceivedCallback) {
  const headers = Object.fromEntries(Object.entries(cb.headers).map(([k, v]) => [k, String(v)]));
  return new Webhook(CALLBACK_SECRET).verify(cb.body, headers) as { id: string; type: string; occurred_at: string; wait: { id: string; status: string; signal: string } };
}

const about = (r: Receiver, waitId: string, type?: string) => r.received.filter((cb) => cb.json.wait.id === waitId && (!type || cb.json.type === type));

/** The callbacks the inbox has about `waitId`, once there are `n` (of `type`). */
const heard = (waitId: string, type: string, n = 1) =>
  waitFor(`${n} ${type} notification(s) about ${waitId}`, () => about(inbox, waitId, type), { until: (cbs) => cbs.length >= n });

const notificationRows = (waitId: string) =>
  app.database.sql<{ type: string; status: string; attempts: number; last_error: string | null }[]>`
    select type, status, attempts, last_error from signalbox.notifications where wait_id = ${waitId} order by type`;

describe("notify_url", () => {
  it("hears a signed signal.waiting event when a wait opens", async () => {
    const wait = await openWait("notify-1", { signal: "needs-review", metadata: { assignee: "kim" } });
    const [cb] = await heard(wait.id, "signal.waiting");
    const event = verified(cb!);
    expect(event).toMatchObject({ type: "signal.waiting", wait: { id: wait.id, status: "waiting", signal: "needs-review", metadata: { assignee: "kim" } } });
    expect(cb!.headers["webhook-id"]).toBe(event.id);
    expect(Date.parse(event.occurred_at)).toBeGreaterThanOrEqual(Date.parse(wait.created_at));
    // A tampered body fails verification: the check above is a real one.
    expect(() => new Webhook(CALLBACK_SECRET).verify(cb!.body.replace("notify-1", "notify-2"), Object.fromEntries(Object.entries(cb!.headers).map(([k, v]) => [k, String(v)])))).toThrow();
  });

  it("never tells the notify_url receiver the callback URL's credentials, query or fragment", async () => {
    const secretUrl = "https://engine:hunter2@engine.example/resume/run-7?token=s3cr3t#frag";
    const wait = await openWait("notify-creds", { signal: "needs-review", callback_url: secretUrl });
    const [cb] = await heard(wait.id, "signal.waiting");
    expect(verified(cb!).wait).toMatchObject({ callback_url: "https://engine.example/resume/run-7" });
    expect(cb!.body).not.toMatch(/hunter2|s3cr3t|frag|engine:/);
  });

  it("a type without notify_url notifies nobody", async () => {
    const wait = await openWait("notify-2", { signal: "silent" });
    await drainJobs(app);
    expect(await notificationRows(wait.id)).toEqual([]); // rows and their jobs are made with the wait, or never
  });

  it("sends signal.reminder reminders_s before the deadline, and no reminder already past at opening", async () => {
    // A one-hour timeout: the 60 s reminder falls due 3540 s after opening, the 7200 s one never.
    const wait = await openWait("remind-1", { signal: "needs-review", timeout_s: 3600 });
    await heard(wait.id, "signal.waiting");
    await advanceClock(app, 3500);
    await drainJobs(app, { tasks: ["deliver_notification"], dueOnly: true }); // what is due has run
    expect(about(inbox, wait.id, "signal.reminder")).toEqual([]); // 40 s before the reminder: not yet
    await advanceClock(app, 50);
    const [reminder] = await heard(wait.id, "signal.reminder");
    const event = verified(reminder!);
    expect(event.wait).toMatchObject({ id: wait.id, status: "waiting" });
    // occurred_at is when the reminder fell due (60 s before the deadline), not when the wait opened.
    const { timeout_at } = (await (await app.api(`/waits/${wait.id}`)).json()) as { timeout_at: string };
    expect(Date.parse(event.occurred_at)).toBe(Date.parse(timeout_at) - 60_000);
    // Nothing but waiting + one reminder.
    await drainJobs(app, { tasks: ["deliver_notification"] });
    expect(about(inbox, wait.id).map((cb) => cb.json.type).sort()).toEqual(["signal.reminder", "signal.waiting"]);
    expect(about(inbox, wait.id, "signal.waiting")[0]!.headers["webhook-id"]).not.toBe(reminder!.headers["webhook-id"]);
  });

  it("sends no reminder once the wait has been resolved", async () => {
    const wait = await openWait("remind-2", { signal: "needs-review", timeout_s: 3600 });
    const sent = await fetch(`${app.baseUrl}/signals/remind-2/needs-review`, { method: "POST", body: JSON.stringify({ ok: true }) });
    expect(sent.status).toBe(202);
    await advanceClock(app, 3550); // past the reminder's time
    await drainJobs(app, { tasks: ["deliver_notification"] });
    expect(about(inbox, wait.id, "signal.reminder")).toEqual([]);
    const rows = await notificationRows(wait.id);
    expect(rows.find((r) => r.type === "signal.reminder")?.status).toBe("skipped");
  });

  it("is retried like callbacks: 503 then 204 is two attempts with the same webhook-id", async () => {
    const flaky = await startCallbackReceiver((n) => (n === 1 ? 503 : 204));
    try {
      await declare("flaky-review", { auth: { scheme: "none" }, notify_url: flaky.url });
      const wait = await openWait("retry-1", { signal: "flaky-review" });
      const [first, second] = await flaky.waitFor(2);
      expect(verified(first!).type).toBe("signal.waiting");
      expect(verified(second!).type).toBe("signal.waiting");
      expect(second!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);
      expect(second!.body).toBe(first!.body); // the same event, again
      await drainJobs(app);
      expect(flaky.received).toHaveLength(2);
      expect(await notificationRows(wait.id)).toEqual([{ type: "signal.waiting", status: "delivered", attempts: 2, last_error: null }]);
    } finally {
      await flaky.close();
    }
  });

  it("a 4xx other than 408/429 is permanent: one attempt, then failed", async () => {
    const gone = await startCallbackReceiver(() => 410);
    try {
      await declare("gone-review", { auth: { scheme: "none" }, notify_url: gone.url });
      const wait = await openWait("retry-2", { signal: "gone-review" });
      await gone.waitFor(1);
      await drainJobs(app);
      expect(gone.received).toHaveLength(1);
      expect(await notificationRows(wait.id)).toEqual([{ type: "signal.waiting", status: "failed", attempts: 1, last_error: "HTTP 410" }]);
    } finally {
      await gone.close();
    }
  });
});
