import postgres from "postgres";
import { describe, expect, it } from "vitest";
import { createTestDatabase } from "../helpers/test-app.ts";

// The statements a callback batch runs (signalbox.callback_reads, record_delivery_attempts and
// the record_delivery_attempt it calls for one item, complete_handed_off) keep one generic plan
// per session, made at their first call. That call may come while the tables are empty (a fresh
// database): its plan must still reach each row by its key, or the session would go on scanning
// the tables as they grow. auto_explain shows the plans as they run, nested statements included.

/** An attempt's record item, as the delivery engine sends it (src/delivery/deliver-callback.ts). */
const item = (waitId: string) => ({
  wait_id: waitId, attempts_before: 0, verdict: "delivered", status_code: 200, error: null, duration_ms: 3,
  callback_host: "127.0.0.1", reply: null, sent_ms_ago: 3, round_before: 0,
});

describe("plans kept for the session", () => {
  it("reach every row by its key, made while the tables are empty", async () => {
    const database = await createTestDatabase();
    const plans: string[] = [];
    const sql = postgres(database.url, { max: 1, onnotice: (notice) => plans.push(String(notice.message)) });
    try {
      await sql`load 'auto_explain'`;
      await sql`select set_config('auto_explain.log_min_duration', '0', false), set_config('auto_explain.log_nested_statements', 'on', false),
                       set_config('auto_explain.log_level', 'notice', false)`;
      const [{ waits }] = await sql<[{ waits: string }]>`select reltuples::text as waits from pg_class where oid = 'signalbox.waits'::regclass`;
      expect(waits, "never analyzed: the planner knows nothing of its size").toBe("-1");
      plans.length = 0;

      await sql`select * from signalbox.callback_reads(array['wt_none_1', 'wt_none_2'])`;
      await sql`select * from signalbox.record_delivery_attempts(${sql.json([item("wt_none_1"), item("wt_none_2")])}::json, 5, 1.0, array[1, 2]::bigint[])`;
      await sql`select * from signalbox.record_delivery_attempts(${sql.json([item("wt_none_3")])}::json, 5, 1.0)`;

      const shown = plans.join("\n\n");
      expect(shown).not.toMatch(/Seq Scan/);
      for (const index of ["waits_pkey", "events_pkey", "signals_pkey", "delivery_attempts_wait_attempt", "jobs_pkey1"]) {
        expect(shown, `${index}:\n${shown}`).toMatch(new RegExp(`(Index Scan using|Bitmap Index Scan on) ${index} `));
      }
    } finally {
      await sql.end();
      await database.drop();
    }
  });
});
