import { describe, expect, it } from "vitest";
import { newId } from "../../src/core/ids.ts";
import { RUN_CHANGED_CHANNEL, WAIT_CHANGED_CHANNEL } from "../../src/events/change-feed.ts";
import { EVENT_TYPES } from "../../src/events/events.queries.ts";
import { JOB_MAX_ATTEMPTS, jobKeys } from "../../src/jobs/enqueue.ts";
import { RESOLUTION_EVENTS } from "../../src/waits/resolve-waits.ts";
import { useTestSql } from "../helpers/test-app.ts";

// Job keys, attempts, channels and resolution events are written in SQL (db/functions/
// constants.sql, used by every SQL function) and named in TypeScript: they must be the same
// values, or a wait's timeout would not be removed, a long-poll would not wake, a callback
// would be queued twice.

const testSql = useTestSql();

const one = async <T>(query: Promise<Array<{ v: T }>>): Promise<T> => (await query)[0]!.v;

describe("constants SQL and TypeScript share", () => {
  it("job keys: the same key for every task that has one", async () => {
    const id = "wt_0123456789abcdefghjkmnpqrs";
    const tasks = { expire_wait: jobKeys.expire, deliver_callback: jobKeys.deliver, fire_timer: jobKeys.timer, poll_sensor: jobKeys.sensor, deliver_notification: jobKeys.notify, deliver_start: jobKeys.start };
    for (const [task, key] of Object.entries(tasks)) expect(await one(testSql()<{ v: string }[]>`select signalbox.job_key(${task}, ${id}) as v`), task).toBe(key(id));
    expect(await one(testSql()<{ v: string | null }[]>`select signalbox.job_key('sweep', ${id}) as v`)).toBeNull();
  });

  it("max attempts, NOTIFY channels", async () => {
    expect(await one(testSql()<{ v: number }[]>`select signalbox.job_max_attempts() as v`)).toBe(JOB_MAX_ATTEMPTS);
    expect(await one(testSql()<{ v: string }[]>`select signalbox.wait_changed_channel() as v`)).toBe(WAIT_CHANGED_CHANNEL);
    expect(await one(testSql()<{ v: string }[]>`select signalbox.run_changed_channel() as v`)).toBe(RUN_CHANGED_CHANNEL);
  });

  it("resolution statuses and their history events, which the waits table accepts", async () => {
    for (const [status, event] of Object.entries(RESOLUTION_EVENTS)) {
      expect(await one(testSql()<{ v: string }[]>`select signalbox.resolution_event(${status}) as v`), status).toBe(event);
      expect(EVENT_TYPES).toContain(event);
    }
    expect(await one(testSql()<{ v: string | null }[]>`select signalbox.resolution_event('waiting') as v`)).toBeNull();
    const check = await one(testSql()<{ v: string }[]>`select pg_get_constraintdef(oid) as v from pg_constraint where conname = 'waits_status'`);
    for (const status of ["waiting", ...Object.keys(RESOLUTION_EVENTS)]) expect(check).toContain(`'${status}'`);
  });

  it("ids made in SQL look like ids made in TypeScript, time first", async () => {
    const before = newId("sg");
    const made = await one(testSql()<{ v: string }[]>`select signalbox.new_id('sg') as v`);
    const shape = /^sg_[0-9a-hjkmnp-tv-z]{26}$/;
    expect(before).toMatch(shape);
    expect(made).toMatch(shape);
    expect(made.slice(0, 13) >= before.slice(0, 13)).toBe(true); // both encode the time the same way
    expect(made.slice(0, 13) <= newId("sg").slice(0, 13)).toBe(true);
  });
});
