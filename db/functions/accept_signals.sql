-- Signal intake in one round trip, for many signals at once (src/signals/intake-batcher.ts).
--
-- Each item is what src/signals/send-signal.ts `acceptSignal` does for an authenticated,
-- validated signal, in the same order and under the same run lock: idempotency, cancelled
-- run, then received (the open wait resolves: event, NOTIFY, timeout job dropped, callback
-- queued), buffered, or rejected_not_waiting. Waits it does not handle here (quorum, composite
-- members, timers, sensors, composites) come back as 'slow' with nothing written but the run's
-- lock, and the TypeScript path takes them. Items are taken in run_id order, so two batches
-- lock their runs in the same order and cannot deadlock each other. All callbacks of the
-- batch are queued by one add_jobs call: one NOTIFY, however many signals.
CREATE OR REPLACE FUNCTION "signalbox"."accept_signals"(items json)
RETURNS TABLE (item int, answer text, answer_signal_id text, answer_sequence bigint, answer_wait_id text)
LANGUAGE plpgsql AS $$
DECLARE
  it record;
  v_status text;
  v_earlier record;
  v_wait_id text;
  v_wait_row tid;
  v_special boolean;
  v_callback text;
  v_timeout_at timestamptz;
  v_seq bigint;
  v_deliver text[] := '{}';
BEGIN
  FOR it IN
    SELECT x.* FROM json_to_recordset(items) AS x(
      i int, id text, run_id text, signal text, payload text, payload_hash text, idempotency_key text, buffer_ttl_s int)
    ORDER BY x.run_id, x.i
  LOOP
    -- The run's lock: sequences, the open wait and idempotency are decided under it.
    INSERT INTO signalbox.runs AS r (run_id) VALUES (it.run_id)
      ON CONFLICT (run_id) DO UPDATE SET run_id = excluded.run_id
      RETURNING r.status INTO v_status;

    IF it.idempotency_key IS NOT NULL THEN
      SELECT s.id, s.sequence, s.wait_id, s.payload_hash INTO v_earlier FROM signalbox.signals s
        WHERE s.run_id = it.run_id AND s.signal = it.signal AND s.idempotency_key = it.idempotency_key AND s.sequence IS NOT NULL;
      IF FOUND THEN
        IF v_earlier.payload_hash IS NOT DISTINCT FROM it.payload_hash THEN
          RETURN QUERY SELECT it.i, 'duplicate'::text, v_earlier.id, v_earlier.sequence, v_earlier.wait_id;
        ELSE
          RETURN QUERY SELECT it.i, 'rejected_idempotency_conflict'::text, signalbox.reject_signal(it.id, it.run_id, it.signal, 'rejected_idempotency_conflict', it.payload, it.payload_hash, it.idempotency_key), NULL::bigint, NULL::text;
        END IF;
        CONTINUE;
      END IF;
    END IF;

    IF v_status = 'cancelled' THEN
      RETURN QUERY SELECT it.i, 'rejected_not_active'::text, signalbox.reject_signal(it.id, it.run_id, it.signal, 'rejected_not_active', it.payload, it.payload_hash, it.idempotency_key), NULL::bigint, NULL::text;
      CONTINUE;
    END IF;

    v_wait_id := NULL;
    SELECT w.id, w.ctid, (w.kind <> 'external' OR w.quorum IS NOT NULL OR w.parent_wait_id IS NOT NULL), w.callback_url, w.timeout_at
      INTO v_wait_id, v_wait_row, v_special, v_callback, v_timeout_at
      FROM signalbox.waits w WHERE w.run_id = it.run_id AND w.signal = it.signal AND w.status = 'waiting';
    IF v_special THEN
      RETURN QUERY SELECT it.i, 'slow'::text, NULL::text, NULL::bigint, NULL::text;
      CONTINUE;
    END IF;
    IF v_wait_id IS NULL AND it.buffer_ttl_s <= 0 THEN
      RETURN QUERY SELECT it.i, 'rejected_not_waiting'::text, signalbox.reject_signal(it.id, it.run_id, it.signal, 'rejected_not_waiting', it.payload, it.payload_hash, it.idempotency_key), NULL::bigint, NULL::text;
      CONTINUE;
    END IF;

    UPDATE signalbox.runs SET last_sequence = last_sequence + 1 WHERE run_id = it.run_id RETURNING last_sequence INTO v_seq;
    INSERT INTO signalbox.signals (id, run_id, signal, sequence, outcome, payload, payload_hash, idempotency_key, wait_id, buffer_expires_at)
      VALUES (it.id, it.run_id, it.signal, v_seq, CASE WHEN v_wait_id IS NULL THEN 'buffered' ELSE 'received' END,
              it.payload, it.payload_hash, it.idempotency_key, v_wait_id,
              CASE WHEN v_wait_id IS NULL THEN now() + it.buffer_ttl_s * interval '1 second' END);

    IF v_wait_id IS NULL THEN
      INSERT INTO signalbox.events (run_id, type, signal_id, data)
        VALUES (it.run_id, 'signal.buffered', it.id, json_build_object('signal', it.signal, 'sequence', v_seq)::jsonb);
      RETURN QUERY SELECT it.i, 'buffered'::text, it.id, v_seq, NULL::text;
      CONTINUE;
    END IF;

    PERFORM signalbox.receive_wait(v_wait_row, v_wait_id, it.run_id, it.id);
    IF v_timeout_at IS NOT NULL THEN
      PERFORM graphile_worker.remove_job('expire:' || v_wait_id);
    END IF;
    IF v_callback IS NOT NULL THEN
      v_deliver := v_deliver || v_wait_id;
    END IF;
    RETURN QUERY SELECT it.i, 'received'::text, it.id, v_seq, v_wait_id;
  END LOOP;

  IF cardinality(v_deliver) > 0 THEN
    PERFORM signalbox.add_jobs(array(
      SELECT json_populate_record(NULL::graphile_worker.job_spec,
        json_build_object('identifier', 'deliver_callback', 'payload', json_build_object('id', d), 'job_key', 'deliver:' || d, 'max_attempts', 25))
      FROM unnest(v_deliver) AS d));
  END IF;
END;
$$;
