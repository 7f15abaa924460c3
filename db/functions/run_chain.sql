-- Continue-as-new (POST /runs/{run}/continue, src/runs/continue-run.ts): a run hands its work
-- to a newer run, and everything later addressed to it goes to the newest run of its chain.
--
-- A run's continued_as is set once and never changes, so a chain only ever grows at its newest
-- end. Intake (accept_signals) and opening a wait (open_wait, src/runs/run-lock.ts) lock the
-- run addressed as they always did; only when that row says continued_as (the lock returns it,
-- so a run never continued pays nothing) do they follow the chain here, locking each run in
-- chain direction, and apply to the newest one under its lock.

-- The newest run of the chain that starts at p_run_id, locked, with every run on the way
-- (p_run_id first, the newest last). Locks in chain direction, as continue_run does.
CREATE OR REPLACE FUNCTION "signalbox"."follow_chain"(p_run_id text)
RETURNS TABLE (run_id text, status text, path text[])
LANGUAGE plpgsql AS $$
DECLARE
  v_run text := p_run_id;
  v_status text;
  v_next text;
  v_path text[] := '{}';
BEGIN
  LOOP
    SELECT r.status, r.continued_as INTO v_status, v_next FROM signalbox.runs r WHERE r.run_id = v_run FOR UPDATE;
    v_path := v_path || v_run;
    EXIT WHEN v_next IS NULL;
    -- continue_run refuses a cycle under the locks, so this only guards against a broken row.
    IF cardinality(v_path) > 100000 THEN
      RAISE EXCEPTION 'follow_chain: the chain from % does not end', p_run_id;
    END IF;
    v_run := v_next;
  END LOOP;
  RETURN QUERY SELECT v_run, v_status, v_path;
END;
$$;

-- Continues p_run_id as p_target, in one transaction, or says why not:
--   continued            done now
--   unchanged            it was continued as p_target before (nothing changes: idempotent)
--   already_continued    it was continued as another run
--   run_cancelled        it is cancelled
--   cycle                p_target is p_run_id, or p_target's chain leads back to it
--   target_has_predecessor  another run was continued as p_target already (a chain is a line)
--   target_cancelled     the newest run of p_target's chain is cancelled
--
-- What it does: every open wait of the run is cancelled through resolve_waits (reason
-- `continued`, callbacks signal.cancelled as for any cancel); its buffered signals still within
-- their TTL move, oldest sequence first, to the newest run of p_target's chain, each taking
-- that run's next sequence and received_at now (appended after its own; the TTL still counts
-- from when it first came), and one that finds an open wait for its
-- name there is received by it at once, as if it had just arrived. A buffered signal whose
-- idempotency key a run of p_target's chain already holds for the name is not moved (it would
-- be the same delivery twice): it stays on the old run, where nothing takes it, until its TTL.
-- Every run of that chain counts, not only the newest: intake reads the keys of every run from
-- the one addressed to the newest (accept_signals), so a retry to the old run would otherwise
-- meet two signals with its key, another's among them (a 409 for its own retry). Events:
-- run.continued on the old run, run.continued_from on p_target.
CREATE OR REPLACE FUNCTION "signalbox"."continue_run"(p_run_id text, p_target text, p_by text, p_reason text)
RETURNS TABLE (answer text, continued_as text)
LANGUAGE plpgsql AS $$
DECLARE
  v_run signalbox.runs;
  v_newest record;
  v_signal record;
  v_wait_id text;
  v_quorum jsonb;
  v_seq bigint;
  v_moved jsonb := '[]'::jsonb;
  v_kept jsonb := '[]'::jsonb;
  v_cancelled text[];
  v_refusal text;
BEGIN
  IF p_target = p_run_id THEN
    RETURN QUERY SELECT 'cycle'::text, NULL::text;
    RETURN;
  END IF;
  -- Both rows exist and are locked, the smaller id first: A-to-B and B-to-A at once queue one
  -- behind the other instead of deadlocking (the second then finds the cycle).
  INSERT INTO signalbox.runs (run_id) VALUES (least(p_run_id, p_target)), (greatest(p_run_id, p_target))
    ON CONFLICT (run_id) DO UPDATE SET run_id = excluded.run_id;
  IF current_setting('signalbox.debug_points', true) = 'on' THEN
    PERFORM signalbox.debug_point('continue-run:locked', p_run_id); -- tests: hold both locks here
  END IF;
  SELECT * INTO v_run FROM signalbox.runs r WHERE r.run_id = p_run_id;

  v_refusal := CASE WHEN v_run.continued_as = p_target THEN 'unchanged'
                    WHEN v_run.continued_as IS NOT NULL THEN 'already_continued'
                    WHEN v_run.status = 'cancelled' THEN 'run_cancelled' END;
  IF v_refusal IS NULL THEN
    SELECT * INTO v_newest FROM signalbox.follow_chain(p_target);
    v_refusal := CASE WHEN p_run_id = ANY(v_newest.path) THEN 'cycle'
                      WHEN EXISTS (SELECT 1 FROM signalbox.runs r WHERE r.continued_as = p_target) THEN 'target_has_predecessor'
                      WHEN v_newest.status = 'cancelled' THEN 'target_cancelled' END;
  END IF;
  IF v_refusal IS NOT NULL THEN
    RETURN QUERY SELECT v_refusal, v_run.continued_as;
    RETURN;
  END IF;

  -- From here on, intake and new waits addressed to the run follow continued_as (they wait for
  -- this transaction on its lock, then read it).
  UPDATE signalbox.runs r SET status = 'continued', continued_as = p_target, continued_at = now(), is_paused = false
    WHERE r.run_id = p_run_id;

  v_cancelled := ARRAY(SELECT w.id FROM signalbox.waits w WHERE w.run_id = p_run_id AND w.status = 'waiting' ORDER BY w.created_at, w.id);
  PERFORM signalbox.resolve_waits(v_cancelled, 'cancelled', NULL,
    jsonb_build_object('reason', 'continued', 'continued_as', p_target, 'by', p_by));
  INSERT INTO signalbox.events (run_id, type, data)
    VALUES (p_target, 'run.continued_from', jsonb_build_object('continued_from', p_run_id, 'by', p_by, 'reason', p_reason));

  FOR v_signal IN
    SELECT s.id, s.signal, s.sequence, s.idempotency_key, s.received_at, s.payload FROM signalbox.signals s
      -- A started signal (signal-with-start) and those kept behind it have no TTL: they move too.
      WHERE s.run_id = p_run_id AND s.outcome IN ('buffered', 'started') AND s.wait_id IS NULL
        AND (s.buffer_expires_at IS NULL OR s.buffer_expires_at > now())
      ORDER BY s.sequence
      FOR UPDATE -- the retention job skips locked rows: it neither expires nor deletes one meanwhile
  LOOP
    IF v_signal.idempotency_key IS NOT NULL AND EXISTS (
      SELECT 1 FROM signalbox.signals x
        WHERE x.run_id = ANY(v_newest.path) AND x.signal = v_signal.signal AND x.idempotency_key = v_signal.idempotency_key AND x.sequence IS NOT NULL) THEN
      v_kept := v_kept || jsonb_build_object('signal_id', v_signal.id, 'signal', v_signal.signal, 'reason', 'idempotency_key_taken');
      CONTINUE;
    END IF;
    UPDATE signalbox.runs r SET last_sequence = r.last_sequence + 1 WHERE r.run_id = v_newest.run_id RETURNING r.last_sequence INTO v_seq;
    -- Only a wait for a signal from outside takes it (a timer, sensor or composite raises its own).
    SELECT w.id, w.quorum INTO v_wait_id, v_quorum FROM signalbox.waits w
      WHERE w.run_id = v_newest.run_id AND w.signal = v_signal.signal AND w.status = 'waiting' AND w.kind = 'external';
    -- Taken by the new run now: its log and its waits take signals in received_at order, which
    -- is then sequence order, dated with the run's lock held as accept_signals dates them (the
    -- time it first came is kept in run.continued).
    UPDATE signalbox.signals s SET run_id = v_newest.run_id, sequence = v_seq, wait_id = v_wait_id, received_at = clock_timestamp() WHERE s.id = v_signal.id;
    v_moved := v_moved || jsonb_build_object('signal_id', v_signal.id, 'signal', v_signal.signal, 'from_sequence', v_signal.sequence, 'sequence', v_seq,
                                             'first_received_at', v_signal.received_at);
    IF v_wait_id IS NOT NULL THEN
      -- The new run already waits for it: received now, as a buffered signal is by a wait that
      -- opens; a quorum wait counts it as a vote, and is received once the votes decide it.
      IF v_quorum IS NULL OR signalbox.cast_vote(v_wait_id, v_newest.run_id, v_signal.id, v_quorum, v_signal.payload) THEN
        PERFORM signalbox.resolve_waits(ARRAY[v_wait_id], 'received', ARRAY[v_signal.id]);
      END IF;
    ELSE
      INSERT INTO signalbox.events (run_id, type, signal_id, data)
        VALUES (v_newest.run_id, 'signal.buffered', v_signal.id,
                jsonb_build_object('signal', v_signal.signal, 'sequence', v_seq, 'continued_from', p_run_id));
    END IF;
  END LOOP;

  INSERT INTO signalbox.events (run_id, type, data) VALUES
    (p_run_id, 'run.continued', jsonb_build_object('continued_as', p_target, 'newest_run_id', v_newest.run_id, 'by', p_by, 'reason', p_reason,
                                                   'cancelled_waits', to_jsonb(v_cancelled), 'moved_signals', v_moved, 'kept_signals', v_kept));
  RETURN QUERY SELECT 'continued'::text, p_target;
END;
$$;
