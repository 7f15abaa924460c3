-- Signal-with-start (a signal type's `start`): what accept_signals asks, under the run's lock,
-- of a signal of such a type that found no open wait of its name.
--
-- 'start': the run was never seen. No signal was ever accepted for it (runs.last_sequence = 0,
--   which counts buffered, expired and purged signals too: the sequence is never reset) and no
--   wait was ever opened for it (no waits row; a run whose every wait was purged by retention
--   and which never took a signal counts as never seen). A runs row made by pause, resume,
--   cancel's descendants, children or checkpoints alone does not make a run seen: those record
--   control state, not work (a cancelled run never gets here: it is rejected_not_active first).
-- 'keep': the run was started by a signal of this name that no wait has consumed yet. The
--   engine cannot have opened its first wait yet, so this signal is kept the same way (buffered,
--   with no TTL) and consumed after the started one, in sequence order: nothing sent while the
--   run starts is lost, whatever the type's buffer_ttl_s.
-- NULL: neither; the type's buffer_ttl_s decides, as for any type.
-- p_last_sequence: the run's last sequence before this signal (accept_signals has drawn the
-- signal's own already).
DROP FUNCTION IF EXISTS "signalbox"."start_decision"(text, text); -- it read last_sequence itself
CREATE OR REPLACE FUNCTION "signalbox"."start_decision"(p_run_id text, p_signal text, p_last_sequence bigint)
RETURNS text LANGUAGE sql STABLE AS $$
  SELECT CASE
    -- A run another was continued as (continue-as-new) was started by its engine: never a start.
    WHEN p_last_sequence = 0 AND NOT EXISTS (SELECT 1 FROM signalbox.waits w WHERE w.run_id = p_run_id)
         AND NOT EXISTS (SELECT 1 FROM signalbox.runs p WHERE p.continued_as = p_run_id) THEN 'start'
    WHEN EXISTS (SELECT 1 FROM signalbox.signals s
                 WHERE s.run_id = p_run_id AND s.signal = p_signal AND s.outcome = 'started' AND s.wait_id IS NULL) THEN 'keep'
  END;
$$;

-- Records the start of a run by its `started` signal, in the intake's transaction: the
-- `run.started` history event (its id is the run.start event's `webhook-id`, the same on every
-- attempt), the run's one run_starts row (its primary key: exactly one start per run) and the
-- delivery job on the deliveries runner (src/delivery/deliver-start.ts).
CREATE OR REPLACE FUNCTION "signalbox"."start_run"(p_run_id text, p_signal text, p_signal_id text, p_url text, p_sequence bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_event_id bigint;
  v_at timestamptz;
BEGIN
  INSERT INTO signalbox.events (run_id, type, signal_id, data)
    VALUES (p_run_id, 'run.started', p_signal_id, jsonb_build_object('signal', p_signal, 'sequence', p_sequence))
    RETURNING id, occurred_at INTO v_event_id, v_at;
  INSERT INTO signalbox.run_starts (run_id, signal_id, signal, url, event_id, occurred_at)
    VALUES (p_run_id, p_signal_id, p_signal, p_url, v_event_id, v_at);
  -- graphile/worker#580: add_job may return no job under contention on its key; roll back.
  IF (SELECT j.id FROM signalbox.add_job('deliver_start', json_build_object('id', p_run_id), now(), signalbox.job_max_attempts(),
                                         signalbox.job_key('deliver_start', p_run_id), 'replace') j) IS NULL THEN
    RAISE EXCEPTION 'add_job returned no job' USING ERRCODE = '40001';
  END IF;
END;
$$;

-- Records one attempt to deliver a run's run.start event (src/delivery/deliver-start.ts), as
-- record_delivery_attempt does for a wait's callback: the compare-and-set on the start's attempt
-- count (two sends of one attempt record it once), the attempt's row in delivery_attempts (by
-- start_run_id), and the next attempt's job when the round may still pass, with the callbacks'
-- backoff. Returns the outcome (delivered, retry, failed) and numbers, or no row when the
-- compare-and-set lost.
DROP FUNCTION IF EXISTS "signalbox"."record_start_attempt"(text, int, text, int, text, int, text, int, double precision); -- it took no round
CREATE OR REPLACE FUNCTION "signalbox"."record_start_attempt"(
  p_run_id text, p_attempts_before int, p_verdict text, p_status_code int, p_error text, p_duration_ms int,
  p_callback_host text, p_max_attempts int, p_backoff_s double precision,
  p_round_before int DEFAULT NULL) -- the start's delivery_round when the attempt began (signalbox.sent_in_earlier_round)
RETURNS TABLE (outcome text, attempt int, round_attempt int) LANGUAGE plpgsql AS $$
DECLARE
  v_attempt constant int := p_attempts_before + 1;
  v_status text;
  v_round_start int;
  v_event_id bigint;
BEGIN
  UPDATE signalbox.run_starts s SET
      delivery_attempts = v_attempt,
      -- An earlier round's attempt leaves the delivery pending, and the round counts from after it.
      delivery_status = CASE WHEN signalbox.sent_in_earlier_round(p_verdict, p_round_before, s.delivery_round) THEN 'pending'
        ELSE signalbox.delivery_status_after(p_verdict, v_attempt, s.delivery_round_start, p_max_attempts) END,
      delivery_round_start = CASE WHEN signalbox.sent_in_earlier_round(p_verdict, p_round_before, s.delivery_round) THEN v_attempt
        ELSE s.delivery_round_start END,
      delivery_last_error = p_error
    WHERE s.run_id = p_run_id AND s.delivery_status = 'pending' AND s.delivery_attempts = p_attempts_before
    RETURNING s.delivery_status, s.delivery_round_start, s.event_id INTO v_status, v_round_start, v_event_id;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  outcome := CASE v_status WHEN 'pending' THEN 'retry' ELSE v_status END;
  attempt := v_attempt;
  round_attempt := v_attempt - v_round_start;

  IF p_attempts_before > 0 THEN
    -- The previous attempt is no longer the latest: it leaves the listing of failing deliveries.
    UPDATE signalbox.delivery_attempts a SET latest = false
      WHERE a.start_run_id = p_run_id AND a.attempt = p_attempts_before AND a.latest;
  END IF;
  INSERT INTO signalbox.delivery_attempts (start_run_id, attempt, event_id, started_at, duration_ms, status_code, error, outcome, callback_host)
    VALUES (p_run_id, v_attempt, v_event_id, now() - p_duration_ms * interval '1 millisecond', p_duration_ms, p_status_code, p_error, outcome, p_callback_host);

  IF outcome = 'retry' THEN
    PERFORM signalbox.queue_next_attempt('deliver_start', p_run_id, v_attempt, v_round_start, p_backoff_s);
  END IF;
  RETURN NEXT;
END;
$$;
