import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { advanceClock } from "../helpers/clock.ts";
import { declareType, openWait } from "../helpers/http.ts";
import { startTestApp, type TestApp } from "../helpers/test-app.ts";
import { waitFor } from "../helpers/wait-for.ts";

// Thousands of deadlines at one instant: every timer slot runs a timeout job, and each job
// times out a batch of the due waits in a transaction. They must not take the whole pool: the
// delivery engine and the API share it. Seen in pg_stat_activity, sampled all through the burst.

const WAITS = 2_000;

let app: TestApp;
let observer: postgres.Sql;

beforeAll(async () => {
  // The shipped defaults: 8 timer slots, a pool of 8.
  app = await startTestApp({ env: { SIGNALBOX_WORKER_CONCURRENCY: "8", SIGNALBOX_DB_POOL_SIZE: "8" } });
  await declareType(app, "approval");
  observer = postgres(app.databaseUrl, { max: 1, onnotice: () => {} });
});
afterAll(async () => {
  await observer?.end();
  await app?.close();
});

describe("a burst of timeouts", () => {
  it("takes at most two of the pool's connections at once, and times every wait out", async () => {
    const runs = Array.from({ length: WAITS }, (_, i) => `burst-${i}`);
    for (let i = 0; i < runs.length; i += 50) {
      await Promise.all(runs.slice(i, i + 50).map((run) => openWait(app, run, { signal: "approval", timeout_s: 30 }, 201)));
    }
    let sampling = true;
    let most = 0;
    const sampler = (async () => {
      while (sampling) {
        // Connections inside a transaction whose latest statement is the expiry's: the due
        // waits' read, or resolving them.
        const [row] = await observer<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and pid <> pg_backend_pid() and xact_start is not null
            and (query like '%w.timeout_at <= now()%' or query like '%signalbox.resolve_waits(%')`;
        most = Math.max(most, row!.n);
      }
    })();
    await advanceClock(app, 31);
    await waitFor(
      "every wait timed out",
      async () => {
        const [row] = await observer<{ n: number }[]>`select count(*)::int as n from signalbox.waits where status = 'timed_out'`;
        return row!.n;
      },
      { until: (n) => n === WAITS, timeoutMs: 60_000 },
    );
    sampling = false;
    await sampler;
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(2);
  });
});
