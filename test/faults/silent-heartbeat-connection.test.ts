import { expect, it } from "vitest";
import { serviceOnOwnPostgres } from "../helpers/own-postgres-service.ts";
import { answers200 } from "../helpers/service-process.ts";

// The connection that asks the database whether it still answers (the availability heartbeat)
// left open and silent (a failover or a network cut: no error, no reset) while every other
// connection works. The database answers: requests must not be refused with 503 for it, and
// /readyz must be ready.

const own = serviceOnOwnPostgres("silent-heartbeat");

it("a heartbeat connection gone silent does not make a database that answers look away", async () => {
  const { pg, svc } = own;
  // The heartbeat asks `select 1` every 0.5 s on a connection of its own; nothing else has asked
  // it for a while once /readyz is no longer polled.
  await new Promise((r) => setTimeout(r, 2_000));
  const [heartbeat] = await pg.admin<Array<{ pid: number }>>`
    select pid from pg_stat_activity
    where application_name = 'signalbox' and query = 'select 1' and query_start > now() - interval '700 milliseconds'`;
  expect(heartbeat, "the heartbeat's backend").toBeDefined();
  process.kill(heartbeat!.pid, "SIGSTOP");
  try {
    const statuses: number[] = [];
    const until = performance.now() + 10_000;
    while (performance.now() < until) {
      statuses.push((await svc.api("/signal-types/approval")).status);
      await new Promise((r) => setTimeout(r, 50));
    }
    // A few may be refused while it is found out; not for good.
    const late = statuses.slice(Math.floor(statuses.length / 2));
    expect(late.filter((s) => s !== 200), `answers in the last 5 s: ${late.join(",")}`).toEqual([]);
    await answers200(svc, "/readyz", 5_000);
  } finally {
    process.kill(heartbeat!.pid, "SIGCONT");
  }
}, 60_000);
