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
CREATE FUNCTION "signalbox"."accept_signals"(items json)
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
--> statement-breakpoint
-- A waiting wait received with a signal, as resolveWaits (src/waits/resolve-waits.ts) does it:
-- the compare-and-set, its signal.received event, the wake-up; returns the updated row. The
-- caller holds the run's lock and found the row (and its ctid) under it: by the ctid, because
-- with `id = ... AND status = 'waiting'` alone a plan cached while the table was nearly empty
-- may scan the whole partial index of open waits (measured: 0.9 ms a signal). Shared by
-- accept_signals and open_wait (migration 0008).
CREATE FUNCTION "signalbox"."receive_wait"(p_wait_row tid, p_wait_id text, p_run_id text, p_signal_id text)
RETURNS signalbox.waits LANGUAGE plpgsql AS $$
DECLARE
  v_event bigint := nextval(pg_get_serial_sequence('signalbox.events', 'id'));
  v_wait signalbox.waits;
BEGIN
  UPDATE signalbox.waits SET status = 'received', resolved_at = now(), signal_id = p_signal_id, resolution_event_id = v_event,
      delivery_status = CASE WHEN callback_url IS NULL THEN 'none' ELSE 'pending' END
    WHERE ctid = p_wait_row AND id = p_wait_id AND status = 'waiting'
    RETURNING * INTO v_wait;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wait % left waiting under its run''s lock', p_wait_id; -- never: the transaction rolls back
  END IF;
  INSERT INTO signalbox.events (id, run_id, type, wait_id, signal_id, data, occurred_at)
    VALUES (v_event, p_run_id, 'signal.received', p_wait_id, p_signal_id, '{}'::jsonb, now());
  PERFORM pg_notify('signalbox_wait_changed', p_wait_id);
  RETURN v_wait;
END;
$$;
--> statement-breakpoint
-- A rejection in the signal log (never numbered); returns its id.
CREATE FUNCTION "signalbox"."reject_signal"(p_id text, p_run_id text, p_signal text, p_outcome text, p_payload text, p_payload_hash text, p_key text)
RETURNS text LANGUAGE sql AS $$
  INSERT INTO signalbox.signals (id, run_id, signal, outcome, payload, payload_hash, idempotency_key)
    VALUES (p_id, p_run_id, p_signal, p_outcome, p_payload, p_payload_hash, p_key)
  RETURNING id;
$$;
--> statement-breakpoint
-- graphile-worker's add_job and add_jobs with generic plans: with an array argument Postgres
-- otherwise re-plans add_jobs' statements on every call (a custom plan always looks cheaper),
-- which was half the time of a one-signal intake. Generic plans are safe there (lookups by the
-- unique job key); not for our own statements, whose generic plans, made while a table is
-- nearly empty, can pick the status index over the primary key. How accept_signals and
-- src/jobs/enqueue.ts call graphile-worker, with the same arguments and results.
CREATE FUNCTION "signalbox"."add_job"(p_identifier text, p_payload json, p_run_at timestamptz, p_max_attempts int, p_job_key text, p_job_key_mode text)
RETURNS graphile_worker._private_jobs LANGUAGE sql
SET plan_cache_mode = force_generic_plan
AS $$
  SELECT * FROM graphile_worker.add_job(p_identifier, p_payload, run_at := p_run_at, max_attempts := p_max_attempts, job_key := p_job_key, job_key_mode := p_job_key_mode);
$$;
--> statement-breakpoint
CREATE FUNCTION "signalbox"."add_jobs"(p_specs graphile_worker.job_spec[])
RETURNS SETOF graphile_worker._private_jobs LANGUAGE sql
SET plan_cache_mode = force_generic_plan
AS $$
  SELECT * FROM graphile_worker.add_jobs(p_specs);
$$;
