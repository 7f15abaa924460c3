import { sql } from "drizzle-orm";
import type { Tx } from "../db/client.ts";
import { recordEvent } from "../events/events.queries.ts";

export interface Vote {
  waitId: string;
  runId: string;
  signalId: string;
  quorum: { count: number; veto?: string[] };
  payload: unknown;
}

/**
 * Counts a signal as a vote on a quorum wait: one vote per distinct `responder` (the first
 * stands; a vote without a responder counts as its own). Returns true when the vote decides
 * the wait: a veto response, or `count` responders agreeing. Partial votes show on the wait
 * (`votes`) and in the run's history (`signal.vote`).
 */
export async function castVote(tx: Tx, v: Vote): Promise<boolean> {
  const body = (v.payload && typeof v.payload === "object" ? v.payload : {}) as Record<string, unknown>;
  const response = typeof body.response === "string" ? body.response : "";
  const responder = typeof body.responder === "string" && body.responder.length > 0 ? body.responder : `anonymous:${v.signalId}`;
  const [tally] = await tx.execute<{ counted: boolean; votes: Record<string, string[]> }>(sql`
    with cast_vote as (
      insert into signalbox.votes (wait_id, responder, response, signal_id)
      values (${v.waitId}::text, ${responder}::text, ${response}::text, ${v.signalId}::text)
      on conflict (wait_id, responder) do nothing
      returning wait_id, responder, response, voted_at
    ), ballots as (
      select response, responder, voted_at from signalbox.votes where wait_id = ${v.waitId}::text
      union all
      select response, responder, voted_at from cast_vote
    ), summary as (
      select coalesce(jsonb_object_agg(response, responders), '{}'::jsonb) as votes
      from (select response, jsonb_agg(responder order by voted_at, responder) as responders from ballots group by response) per_response
    )
    update signalbox.waits set votes = summary.votes from summary
    where id = ${v.waitId}::text
    returning exists (select 1 from cast_vote) as counted, waits.votes`);
  if (!tally?.counted) return false; // the same responder again: still one vote
  await recordEvent(tx, { runId: v.runId, type: "signal.vote", waitId: v.waitId, signalId: v.signalId, data: { responder, response, votes: tally.votes } });
  if (v.quorum.veto?.includes(response)) return true;
  return (tally.votes[response]?.length ?? 0) >= v.quorum.count;
}
