import { expect } from "vitest";
import { SILENT_AFTER_MS } from "../../src/db/silent-connections.ts";
import type { PrivatePostgres } from "./private-postgres.ts";
import { answers200, type ServiceProcess } from "./service-process.ts";

/**
 * One connection of the API's pool left open and silent (SIGSTOP to its backend: a failover or a
 * network cut, no error, no reset) while every other connection, and new ones, work. A request
 * whose query lands on it must not hang: it gets a 503 soon, and the connection is replaced, so
 * later requests (a burst that spreads over every connection of the pool) are answered.
 */
export async function expectSilentPoolConnectionReplaced(own: { pg: PrivatePostgres; svc: ServiceProcess }): Promise<void> {
  const { pg, svc } = own;
  // Open a few of the pool's connections, then let them idle (the heartbeat's stays busy).
  await Promise.all(Array.from({ length: 6 }, () => svc.api("/waits?limit=1")));
  await new Promise((r) => setTimeout(r, 2_000));
  const [pool] = await pg.admin<Array<{ pid: number }>>`
    select pid from pg_stat_activity
    where application_name = 'signalbox' and state = 'idle' and not (query = 'select 1' and query_start > now() - interval '700 milliseconds')
    order by backend_start limit 1`;
  expect(pool, "an idle backend of the pool").toBeDefined();
  process.kill(pool!.pid, "SIGSTOP");
  try {
    // Rounds of more requests at once than the pool has connections, for longer than a connection
    // may stay silent: one of the first round lands on the silent one (one at a time, the pool
    // kept reusing the connections just freed and often never reached it, and the burst below met
    // it instead: a 503 there in half the runs on a slow machine).
    const answers: Array<{ status: number; ms: number }> = [];
    const until = performance.now() + SILENT_AFTER_MS + 1_000;
    const timed = async () => {
      const started = performance.now();
      const status = await svc.api("/waits?limit=1", { timeoutMs: SILENT_AFTER_MS + 10_000 }).then((r) => r.status, () => 0);
      answers.push({ status, ms: Math.round(performance.now() - started) });
    };
    while (answers.length < 10 || performance.now() < until) {
      await Promise.all(Array.from({ length: 12 }, timed));
      await new Promise((r) => setTimeout(r, 50));
    }
    const slow = answers.filter((a) => a.status === 0 || a.ms > SILENT_AFTER_MS + 2_000);
    expect(slow, `answers (status, ms): ${JSON.stringify(answers)}`).toEqual([]);
    // A burst larger than the pool: queries are spread over every connection, silent or not.
    const burst = await Promise.all(Array.from({ length: 30 }, () => svc.api("/waits?limit=1", { timeoutMs: 20_000 }).then((r) => r.status, () => 0)));
    expect(burst.filter((s) => s !== 200), `burst: ${burst.join(",")}`).toEqual([]);
    await answers200(svc, "/readyz", 5_000);
  } finally {
    process.kill(pool!.pid, "SIGCONT");
  }
}
