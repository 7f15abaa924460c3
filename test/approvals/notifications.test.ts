import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startCallbackReceiver, type ReceivedCallback } from "../helpers/callback-receiver.ts";
import { advanceClock, runDueJobs } from "../helpers/clock.ts";
import { openWait as open } from "../helpers/http.ts";
import { CALLBACK_SECRET, startTestApp, type TestApp } from "../helpers/test-app.ts";

// notify_url (API.md): a signed `signal.waiting` event when a wait opens, `signal.reminder`
// reminders_s before its deadline, nothing once the wait has left waiting, retried like callbacks.
// The app runs without its worker: the test runs the due jobs itself (runDueJobs) and moves the
// deadlines' clock (advanceClock), so what is sent, and when, is decided by the test alone.

type Receiver = Awaited<ReturnType<typeof startCallbackReceiver>>;

let app: TestApp;
let inbox: Receiver;
beforeAll(async () => {
  app = await startTestApp({ worker: false });
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


const notificationRows = (waitId: string) =>
  app.database.sql<{ type: string; status: string; attempts: number; last_error: string | null }[]>`
    select type, status, attempts, last_error from signalbox.notifications where wait_id = ${waitId} order by type`;

describe("notify_url", () => {
  it("hears a signed signal.waiting event when a wait opens", async () => {
    const wait = await openWait("notify-1", { signal: "needs-review", metadata: { assignee: "kim" } });
    await runDueJobs(app);
    const [cb] = about(inbox, wait.id);
    expect(about(inbox, wait.id)).toHaveLength(1);
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
    await runDueJobs(app);
    const [cb] = about(inbox, wait.id, "signal.waiting");
    expect(verified(cb!).wait).toMatchObject({ callback_url: "https://engine.example/resume/run-7" });
    expect(cb!.body).not.toMatch(/hunter2|s3cr3t|frag|engine:/);
  });

  it("a type without notify_url notifies nobody", async () => {
    const wait = await openWait("notify-2", { signal: "silent" });
    await runDueJobs(app);
    expect(await notificationRows(wait.id)).toEqual([]); // rows and their jobs are made with the wait, or never
  });

  it("sends signal.reminder reminders_s before the deadline, and no reminder already past at opening", async () => {
    // A one-hour timeout: the 60 s reminder falls due 3540 s after opening, the 7200 s one never.
    const wait = await openWait("remind-1", { signal: "needs-review", timeout_s: 3600 });
    await runDueJobs(app);
    expect(about(inbox, wait.id).map((cb) => cb.json.type)).toEqual(["signal.waiting"]);
    await advanceClock(app, 3500);
    await runDueJobs(app);
    expect(about(inbox, wait.id, "signal.reminder")).toEqual([]); // 40 s before the reminder: not yet
    await advanceClock(app, 50);
    await runDueJobs(app);
    const [reminder] = about(inbox, wait.id, "signal.reminder");
    const event = verified(reminder!);
    expect(event.wait).toMatchObject({ id: wait.id, status: "waiting" });
    // occurred_at is when the reminder fell due (60 s before the deadline), not when the wait opened.
    const { timeout_at } = (await (await app.api(`/waits/${wait.id}`)).json()) as { timeout_at: string };
    expect(Date.parse(event.occurred_at)).toBe(Date.parse(timeout_at) - 60_000);
    // Nothing but waiting + one reminder.
    expect(about(inbox, wait.id).map((cb) => cb.json.type).sort()).toEqual(["signal.reminder", "signal.waiting"]);
    expect(about(inbox, wait.id, "signal.waiting")[0]!.headers["webhook-id"]).not.toBe(reminder!.headers["webhook-id"]);
  });

  it("sends no reminder once the wait has been resolved", async () => {
    const wait = await openWait("remind-2", { signal: "needs-review", timeout_s: 3600 });
    const sent = await fetch(`${app.baseUrl}/signals/remind-2/needs-review`, { method: "POST", body: JSON.stringify({ ok: true }) });
    expect(sent.status).toBe(202);
    await advanceClock(app, 3550); // past the reminder's time
    await runDueJobs(app);
    expect(about(inbox, wait.id, "signal.reminder")).toEqual([]);
    const rows = await notificationRows(wait.id);
    expect(rows.find((r) => r.type === "signal.reminder")?.status).toBe("skipped");
  });

  it("is retried like callbacks: 503 then 204 is two attempts with the same webhook-id", async () => {
    const flaky = await startCallbackReceiver((n) => (n === 1 ? 503 : 204));
    try {
      await declare("flaky-review", { auth: { scheme: "none" }, notify_url: flaky.url });
      const wait = await openWait("retry-1", { signal: "flaky-review" });
      await runDueJobs(app);
      expect(flaky.received).toHaveLength(1); // the retry waits for its backoff
      expect(await notificationRows(wait.id)).toEqual([{ type: "signal.waiting", status: "pending", attempts: 1, last_error: "HTTP 503" }]);
      await advanceClock(app, 1);
      await runDueJobs(app);
      const [first, second] = flaky.received;
      expect(verified(first!).type).toBe("signal.waiting");
      expect(verified(second!).type).toBe("signal.waiting");
      expect(second!.headers["webhook-id"]).toBe(first!.headers["webhook-id"]);
      expect(second!.body).toBe(first!.body); // the same event, again
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
      await runDueJobs(app);
      await advanceClock(app, 3600); // no retry comes, however long one waits
      await runDueJobs(app);
      expect(gone.received).toHaveLength(1);
      expect(await notificationRows(wait.id)).toEqual([{ type: "signal.waiting", status: "failed", attempts: 1, last_error: "HTTP 410" }]);
      // It gave up once, and /metrics counts it.
      const metrics = await (await fetch(`${app.baseUrl}/metrics`)).text();
      expect(metrics).toMatch(/^signalbox_notifications_given_up_total\{reason="rejected"\} 1$/m);
    } finally {
      await gone.close();
    }
  });
});
