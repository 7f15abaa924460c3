-- Opening a plain wait in one round trip (src/waits/open-wait.ts `openPlainWait`).
--
-- What openWait does for one external wait whose signal type sends no notifications, in the
-- same order under the run's lock: idempotency by key, cancelled run, one open wait per run
-- and name, the wait and its signal.waiting event, then the oldest usable buffered signal
-- receives it at once, or a deadline already past times it out at once (both through
-- signalbox.resolve_waits: event, NOTIFY, callback queued), or its timeout is covered (the
-- deadline alarm or a job of its own: db/functions/deadline_alarm.sql).
-- A run continued as another (db/functions/run_chain.sql): the wait opens on the newest run of
-- its chain, under that run's lock (the key is looked up there), and row_to_json(wait) names it.
CREATE OR REPLACE FUNCTION "signalbox"."open_wait"(
  p_id text, p_run_id text, p_signal text, p_key text, p_timeout_at timestamptz, p_timeout_s double precision,
  p_callback_url text, p_metadata jsonb)
RETURNS TABLE (answer text, wait json)
LANGUAGE plpgsql AS $$
DECLARE
  v_status text;
  v_existing signalbox.waits;
  v_deadline timestamptz;
  v_wait signalbox.waits;
  v_buffered text;
  v_wait_row tid;
  v_continued_as text;
BEGIN
  INSERT INTO signalbox.runs AS r (run_id) VALUES (p_run_id)
    ON CONFLICT (run_id) DO UPDATE SET run_id = excluded.run_id
    RETURNING r.status, r.continued_as INTO v_status, v_continued_as;
  IF v_continued_as IS NOT NULL THEN
    SELECT c.run_id, c.status INTO p_run_id, v_status FROM signalbox.follow_chain(v_continued_as) c;
  END IF;
  IF current_setting('signalbox.debug_points', true) = 'on' THEN
    PERFORM signalbox.debug_point('open-wait:locked', p_run_id); -- tests: hold the run's lock here
  END IF;

  IF p_key IS NOT NULL THEN
    SELECT * INTO v_existing FROM signalbox.waits w WHERE w.run_id = p_run_id AND w.key = p_key;
    IF FOUND THEN
      RETURN QUERY SELECT CASE WHEN v_existing.signal = p_signal THEN 'existing' ELSE 'key_conflict' END, row_to_json(v_existing);
      RETURN;
    END IF;
  END IF;
  IF v_status = 'cancelled' THEN
    RETURN QUERY SELECT 'cancelled'::text, NULL::json;
    RETURN;
  END IF;
  -- Decided under the run's lock (every writer of a run's waits takes it first); the unique
  -- index waits_one_open stays the backstop.
  IF EXISTS (SELECT 1 FROM signalbox.waits w WHERE w.run_id = p_run_id AND w.signal = p_signal AND w.status = 'waiting') THEN
    RETURN QUERY SELECT 'open_conflict'::text, NULL::json;
    RETURN;
  END IF;
  -- Rounded as the column stores it, so the job's run_at is the wait's timeout_at exactly.
  v_deadline := coalesce(p_timeout_at, now() + p_timeout_s * interval '1 second')::timestamptz(3);

  INSERT INTO signalbox.waits (id, run_id, signal, key, timeout_at, callback_url, metadata, kind)
    VALUES (p_id, p_run_id, p_signal, p_key, v_deadline, p_callback_url, coalesce(p_metadata, '{}'::jsonb), 'external')
    RETURNING * INTO v_wait;
  INSERT INTO signalbox.events (run_id, type, wait_id, data)
    VALUES (p_run_id, 'signal.waiting', p_id, jsonb_build_object('signal', p_signal, 'kind', 'external'));

  -- The oldest buffered signal still usable is this wait's at once: a started one (signal-with-
  -- start) and those kept behind it have no TTL. Locked: the retention job (which skips locked
  -- rows) then neither marks it expired nor deletes it meanwhile.
  SELECT s.id INTO v_buffered FROM signalbox.signals s
    WHERE s.run_id = p_run_id AND s.signal = p_signal AND s.outcome IN ('buffered', 'started') AND s.wait_id IS NULL
      AND (s.buffer_expires_at IS NULL OR s.buffer_expires_at > now())
    ORDER BY s.sequence LIMIT 1 -- the order the run's lock accepted them in (received_at is each transaction's start)
    FOR UPDATE;
  IF v_buffered IS NOT NULL OR v_deadline <= now() THEN
    SELECT w.ctid INTO v_wait_row FROM signalbox.waits w WHERE w.id = p_id;
  END IF;
  IF v_buffered IS NOT NULL THEN
    UPDATE signalbox.signals SET wait_id = p_id WHERE id = v_buffered;
    PERFORM signalbox.resolve_waits(ARRAY[p_id], 'received', ARRAY[v_buffered], '{}'::jsonb, ARRAY[v_wait_row]);
    SELECT * INTO v_wait FROM signalbox.waits w WHERE w.id = p_id;
  ELSIF v_deadline <= now() THEN
    PERFORM signalbox.resolve_waits(ARRAY[p_id], 'timed_out', NULL, '{}'::jsonb, ARRAY[v_wait_row]);
    SELECT * INTO v_wait FROM signalbox.waits w WHERE w.id = p_id;
  ELSIF v_deadline IS NOT NULL THEN
    PERFORM signalbox.cover_deadline(p_id, v_wait.timeout_at);
  END IF;
  RETURN QUERY SELECT 'created'::text, row_to_json(v_wait);
END;
$$;
