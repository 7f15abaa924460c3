-- Signal intake, for one signal or many at once: the only implementation of it
-- (src/signals/intake-batcher.ts batches concurrent signals into one call; approval links call
-- it for their one signal inside the transaction that claims the link).
--
-- Each item is an authenticated, validated signal. Under its run's lock, in this order:
-- idempotency, cancelled run, then received (the run's open wait for the name, a wait for a
-- signal from outside: a timer, sensor or composite raises its own, so a signal of its name finds
-- no wait; with expect_wait_id only that wait counts, and the signal is never buffered), started (a type with
-- a start_url, a run never seen: db/functions/start_run.sql), buffered, or rejected_not_waiting.
-- A quorum wait counts the signal as a vote and is received only once the vote decides it.
-- Waits leave `waiting` through signalbox.resolve_waits only.
--
-- Items are taken in run_id order, so two batches lock their runs in the same order and cannot
-- deadlock each other. The waits the batch receives are resolved together by one
-- resolve_waits call at the end (one add_jobs, one NOTIFY for all callbacks); an item whose run
-- already has one pending first has those resolved, so every signal sees the effects of the
-- ones before it exactly as if each had been alone.
--
-- A run continued as another (continue_run, db/functions/run_chain.sql): the item goes to the
-- newest run of its chain, locked after the run addressed (chain direction), and its answer
-- names the run it was applied to (answer_run_id); idempotency keys count across the runs on
-- the way, so a retry of a signal taken before the continue is still a duplicate. Whether a run
-- was continued comes back with its lock: a run never continued pays nothing for it.
--
-- Handed off (hand_off_s): the callbacks of the waits received are jobs the caller's process
-- runs itself once this commits (enqueue_callbacks.sql); each such wait comes back in a row of
-- its own besides the items' answers (item null, answer 'callback_job', answer_wait_id,
-- answer_job), with what its callback carries (answer_callback: receive_handing_off), so the
-- caller sends it without reading it back.
-- The answer's columns changed (answer_run_id, answer_job, then answer_callback): a result type
-- cannot be replaced in place.
DROP FUNCTION IF EXISTS "signalbox"."accept_signals"(json);
DROP FUNCTION IF EXISTS "signalbox"."accept_signals"(json, double precision);
CREATE OR REPLACE FUNCTION "signalbox"."accept_signals"(items json, hand_off_s double precision DEFAULT NULL)
RETURNS TABLE (item int, answer text, answer_signal_id text, answer_sequence bigint, answer_wait_id text, answer_run_id text, answer_job bigint, answer_callback json)
LANGUAGE plpgsql AS $$
DECLARE
  it record;
  v_status text;
  v_earlier record;
  v_wait_id text;
  v_wait_row tid;
  v_quorum jsonb;
  v_seq bigint;
  v_ids text[] := '{}';
  v_rows tid[] := '{}';
  v_signal_ids text[] := '{}';
  v_pending_runs text[] := '{}';
  v_continued_as text;
  v_path text[];
  v_start text;
BEGIN
  FOR it IN
    SELECT x.* FROM json_to_recordset(items) AS x(
      i int, id text, run_id text, signal text, payload text, payload_hash text, idempotency_key text, buffer_ttl_s int, expect_wait_id text, start_url text)
    ORDER BY x.run_id, x.i
  LOOP
    -- The run's lock: sequences, the open wait and idempotency are decided under it. Taken by
    -- drawing the run's next sequence at once, so an accepted signal writes its runs row once
    -- (a lock, then an update, wrote it twice); an item that ends up not accepted gives the
    -- number back under the same lock (signalbox.return_sequence), so sequences stay
    -- gapless. A run never seen starts at 1.
    UPDATE signalbox.runs r SET last_sequence = r.last_sequence + 1 WHERE r.run_id = it.run_id
      RETURNING r.status, r.continued_as, r.last_sequence INTO v_status, v_continued_as, v_seq;
    IF NOT FOUND THEN
      INSERT INTO signalbox.runs AS r (run_id, last_sequence) VALUES (it.run_id, 1)
        ON CONFLICT (run_id) DO UPDATE SET last_sequence = r.last_sequence + 1
        RETURNING r.status, r.continued_as, r.last_sequence INTO v_status, v_continued_as, v_seq;
    END IF;
    v_path := ARRAY[it.run_id];
    IF v_continued_as IS NOT NULL THEN
      -- A continued run takes no signal: its number back, and the newest run's drawn instead.
      PERFORM signalbox.return_sequence(it.run_id);
      SELECT c.run_id, c.status, v_path || c.path INTO it.run_id, v_status, v_path FROM signalbox.follow_chain(v_continued_as) c;
      UPDATE signalbox.runs r SET last_sequence = r.last_sequence + 1 WHERE r.run_id = it.run_id RETURNING r.last_sequence INTO v_seq;
    END IF;
    -- Chains can bring a run back out of run_id order: any run with a resolution pending.
    IF it.run_id = ANY(v_pending_runs) THEN
      RETURN QUERY SELECT * FROM signalbox.receive_handing_off(v_ids, v_signal_ids, v_rows, hand_off_s);
      v_ids := '{}';
      v_rows := '{}';
      v_signal_ids := '{}';
      v_pending_runs := '{}';
    END IF;
    IF current_setting('signalbox.debug_points', true) = 'on' THEN
      PERFORM signalbox.debug_point('accept-signals:locked', it.run_id); -- tests: hold the run's lock here
    END IF;

    IF it.idempotency_key IS NOT NULL THEN
      -- Nearest the run addressed first: a signal continue kept behind (its key held further on
      -- in the chain) is the one a retry to its own run means.
      SELECT s.id, s.sequence, s.wait_id, s.payload_hash, s.run_id INTO v_earlier FROM signalbox.signals s
        WHERE s.run_id = ANY(v_path) AND s.signal = it.signal AND s.idempotency_key = it.idempotency_key AND s.sequence IS NOT NULL
        ORDER BY array_position(v_path, s.run_id) LIMIT 1;
      IF FOUND THEN
        PERFORM signalbox.return_sequence(it.run_id);
        IF v_earlier.payload_hash IS NOT DISTINCT FROM it.payload_hash THEN
          RETURN QUERY SELECT it.i, 'duplicate'::text, v_earlier.id, v_earlier.sequence, v_earlier.wait_id, v_earlier.run_id, NULL::bigint, NULL::json;
        ELSE
          RETURN QUERY SELECT it.i, 'rejected_idempotency_conflict'::text, signalbox.reject_signal(it.id, it.run_id, it.signal, 'rejected_idempotency_conflict', it.payload, it.payload_hash, it.idempotency_key), NULL::bigint, NULL::text, it.run_id, NULL::bigint, NULL::json;
        END IF;
        CONTINUE;
      END IF;
    END IF;

    IF v_status = 'cancelled' THEN
      PERFORM signalbox.return_sequence(it.run_id);
      RETURN QUERY SELECT it.i, 'rejected_not_active'::text, signalbox.reject_signal(it.id, it.run_id, it.signal, 'rejected_not_active', it.payload, it.payload_hash, it.idempotency_key), NULL::bigint, NULL::text, it.run_id, NULL::bigint, NULL::json;
      CONTINUE;
    END IF;

    v_wait_id := NULL;
    SELECT w.id, w.ctid, w.quorum INTO v_wait_id, v_wait_row, v_quorum
      FROM signalbox.waits w WHERE w.run_id = it.run_id AND w.signal = it.signal AND w.status = 'waiting' AND w.kind = 'external';
    IF it.expect_wait_id IS NOT NULL AND v_wait_id IS DISTINCT FROM it.expect_wait_id THEN
      v_wait_id := NULL; -- another wait of that name is as good as none
    END IF;
    v_start := NULL;
    IF v_wait_id IS NULL AND it.start_url IS NOT NULL AND it.expect_wait_id IS NULL THEN
      v_start := signalbox.start_decision(it.run_id, it.signal, v_seq - 1); -- only types with a start pay for this
    END IF;
    IF v_wait_id IS NULL AND v_start IS NULL AND (it.buffer_ttl_s <= 0 OR it.expect_wait_id IS NOT NULL) THEN
      PERFORM signalbox.return_sequence(it.run_id);
      RETURN QUERY SELECT it.i, 'rejected_not_waiting'::text, signalbox.reject_signal(it.id, it.run_id, it.signal, 'rejected_not_waiting', it.payload, it.payload_hash, it.idempotency_key), NULL::bigint, NULL::text, it.run_id, NULL::bigint, NULL::json;
      CONTINUE;
    END IF;

    -- received_at: now, with the run's lock held (clock_timestamp), not when the transaction
    -- began (now()): a statement that waited for a run's lock would otherwise date its signal
    -- before those the run took meanwhile, and the log's oldest-first paging (received_at, id)
    -- would list it among them, or behind a client's cursor, never seen.
    INSERT INTO signalbox.signals (id, run_id, signal, sequence, outcome, payload, payload_hash, idempotency_key, wait_id, buffer_expires_at, received_at)
      VALUES (it.id, it.run_id, it.signal, v_seq,
              CASE WHEN v_wait_id IS NOT NULL THEN 'received' WHEN v_start = 'start' THEN 'started' ELSE 'buffered' END,
              it.payload, it.payload_hash, it.idempotency_key, v_wait_id,
              -- A started signal, and those kept behind it, wait for the run's first wait: no TTL.
              CASE WHEN v_wait_id IS NULL AND v_start IS NULL THEN now() + it.buffer_ttl_s * interval '1 second' END,
              clock_timestamp());

    IF v_start = 'start' THEN
      PERFORM signalbox.start_run(it.run_id, it.signal, it.id, it.start_url, v_seq);
      RETURN QUERY SELECT it.i, 'started'::text, it.id, v_seq, NULL::text, it.run_id, NULL::bigint, NULL::json;
      CONTINUE;
    END IF;

    IF v_wait_id IS NULL THEN
      INSERT INTO signalbox.events (run_id, type, signal_id, data)
        VALUES (it.run_id, 'signal.buffered', it.id, json_build_object('signal', it.signal, 'sequence', v_seq)::jsonb);
      RETURN QUERY SELECT it.i, 'buffered'::text, it.id, v_seq, NULL::text, it.run_id, NULL::bigint, NULL::json;
      CONTINUE;
    END IF;

    IF v_quorum IS NOT NULL THEN
      IF NOT signalbox.cast_vote(v_wait_id, it.run_id, it.id, v_quorum, it.payload) THEN
        RETURN QUERY SELECT it.i, 'received'::text, it.id, v_seq, v_wait_id, it.run_id, NULL::bigint, NULL::json; -- a vote that does not decide yet
        CONTINUE;
      END IF;
      -- Counting the vote updated the wait (its votes): find its new row version.
      SELECT w.ctid INTO v_wait_row FROM signalbox.waits w WHERE w.run_id = it.run_id AND w.signal = it.signal AND w.status = 'waiting';
    END IF;
    v_ids := v_ids || v_wait_id;
    v_rows := v_rows || v_wait_row;
    v_signal_ids := v_signal_ids || it.id;
    v_pending_runs := v_pending_runs || it.run_id;
    RETURN QUERY SELECT it.i, 'received'::text, it.id, v_seq, v_wait_id, it.run_id, NULL::bigint, NULL::json;
  END LOOP;

  IF cardinality(v_ids) > 0 THEN
    RETURN QUERY SELECT * FROM signalbox.receive_handing_off(v_ids, v_signal_ids, v_rows, hand_off_s);
  END IF;
END;
$$;

-- The waits accept_signals received, resolved: one row each for those whose callbacks were
-- handed off (in accept_signals' shape: item null, answer 'callback_job'), with what the
-- callback carries (signalbox.callback_reads), read after the resolve: this statement sees it.
CREATE OR REPLACE FUNCTION "signalbox"."receive_handing_off"(p_ids text[], p_signal_ids text[], p_rows tid[], p_hand_off_s double precision)
RETURNS TABLE (item int, answer text, answer_signal_id text, answer_sequence bigint, answer_wait_id text, answer_run_id text, answer_job bigint, answer_callback json)
LANGUAGE plpgsql AS $$
DECLARE
  v_waits text[];
  v_jobs bigint[];
BEGIN
  SELECT array_agg(r.id), array_agg(r.callback_job) INTO v_waits, v_jobs
    FROM signalbox.resolve_waits(p_ids, 'received', p_signal_ids, '{}'::jsonb, p_rows, false, p_hand_off_s) r
    WHERE r.callback_job IS NOT NULL;
  RETURN QUERY SELECT NULL::int, 'callback_job'::text, NULL::text, NULL::bigint, c.wait_id, NULL::text, v_jobs[c.n], c.callback
    FROM signalbox.callback_reads(v_waits) c;
END;
$$;

-- Counts a signal as a vote on a quorum wait: one vote per distinct `responder` (the first
-- stands; a vote without a responder counts as its own). Returns true when the vote decides
-- the wait: a veto response, or `count` responders agreeing. Partial votes show on the wait
-- (`votes`) and in the run's history (`signal.vote`).
CREATE OR REPLACE FUNCTION "signalbox"."cast_vote"(p_wait_id text, p_run_id text, p_signal_id text, p_quorum jsonb, p_payload text)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  -- json, not jsonb: a number jsonb cannot hold (1e200000) is still a valid payload.
  v_body constant json := p_payload::json;
  v_response text := CASE WHEN json_typeof(v_body -> 'response') = 'string' THEN v_body ->> 'response' ELSE '' END;
  v_given text := CASE WHEN json_typeof(v_body -> 'responder') = 'string' THEN v_body ->> 'responder' ELSE '' END;
  -- The responder is indexed (one vote each): a very long one is kept short and still distinct.
  v_responder text := CASE WHEN v_given = '' THEN 'anonymous:' || p_signal_id
                           WHEN length(v_given) > 200 THEN left(v_given, 160) || '…' || md5(v_given)
                           ELSE v_given END;
  v_counted boolean;
  v_votes jsonb;
BEGIN
  WITH cast_vote AS (
    INSERT INTO signalbox.votes (wait_id, responder, response, signal_id)
    VALUES (p_wait_id, v_responder, v_response, p_signal_id)
    ON CONFLICT (wait_id, responder) DO NOTHING
    RETURNING votes.wait_id, votes.responder, votes.response, votes.voted_at
  ), ballots AS (
    SELECT b.response, b.responder, b.voted_at FROM signalbox.votes b WHERE b.wait_id = p_wait_id
    UNION ALL
    SELECT c.response, c.responder, c.voted_at FROM cast_vote c
  ), summary AS (
    SELECT coalesce(jsonb_object_agg(p.response, p.responders), '{}'::jsonb) AS votes
    FROM (SELECT b.response, jsonb_agg(b.responder ORDER BY b.voted_at, b.responder) AS responders FROM ballots b GROUP BY b.response) AS p
  )
  UPDATE signalbox.waits w SET votes = summary.votes FROM summary
  WHERE w.id = p_wait_id
  RETURNING EXISTS (SELECT 1 FROM cast_vote), w.votes INTO v_counted, v_votes;
  IF NOT v_counted THEN
    RETURN false; -- the same responder again: still one vote
  END IF;
  INSERT INTO signalbox.events (run_id, type, wait_id, signal_id, data)
    VALUES (p_run_id, 'signal.vote', p_wait_id, p_signal_id, jsonb_build_object('responder', v_responder, 'response', v_response, 'votes', v_votes));
  IF coalesce(p_quorum -> 'veto' ? v_response, false) THEN
    RETURN true;
  END IF;
  RETURN coalesce(jsonb_array_length(v_votes -> v_response), 0) >= (p_quorum ->> 'count')::int;
END;
$$;

-- Gives back the sequence accept_signals drew for an item it did not accept (a duplicate, a
-- rejection, a continued run), under the run's lock, so the next accepted signal takes it.
CREATE OR REPLACE FUNCTION "signalbox"."return_sequence"(p_run_id text)
RETURNS void LANGUAGE sql AS $$
  UPDATE signalbox.runs r SET last_sequence = r.last_sequence - 1 WHERE r.run_id = p_run_id;
$$;
