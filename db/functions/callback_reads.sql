-- What the callbacks of these waits carry, read in one statement: the only implementation of
-- it. For each wait given that has resolved (it has a resolution event), in p_ids' order (n, from
-- 1): the wait as stored, its resolution event and the signal that resolved it, as JSON
-- (src/waits/waits.queries.ts, waitWithEventFromJson). Intake reads it for the callbacks it
-- hands off (receive_handing_off, after its resolve: that statement sees it), the delivery
-- engine for the batches it fetches.
--
-- Generic plans, with sequential scans off: planned once per session rather than on every call
-- (a custom plan each call cost intake 0.2-0.9 ms of planning a batch), and every plan, the one
-- made while the tables were nearly empty included, reaches each row by its primary key (a
-- generic plan made on empty tables hashes a sequential scan of waits, and would keep doing so
-- at a million).
CREATE OR REPLACE FUNCTION "signalbox"."callback_reads"(p_ids text[])
RETURNS TABLE (n int, wait_id text, callback json) LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
BEGIN
  RETURN QUERY
    SELECT c.n::int, w.id,
        json_build_object('wait', to_json(w), 'event', json_build_object('id', e.id, 'type', e.type, 'occurred_at', e.occurred_at),
          'result', CASE WHEN s.id IS NOT NULL THEN json_build_object('sequence', s.sequence, 'payload', s.payload, 'received_at', s.received_at) END)
      FROM unnest(p_ids) WITH ORDINALITY AS c(id, n)
      JOIN signalbox.waits w ON w.id = c.id
      JOIN signalbox.events e ON e.id = w.resolution_event_id
      LEFT JOIN signalbox.signals s ON s.id = w.signal_id
      ORDER BY c.n;
END;
$$;
