-- A waiting wait received with a signal, as resolveWaits (src/waits/resolve-waits.ts) does it:
-- the compare-and-set, its signal.received event, the wake-up; returns the updated row. The
-- caller holds the run's lock and found the row (and its ctid) under it: by the ctid, because
-- with `id = ... AND status = 'waiting'` alone a plan cached while the table was nearly empty
-- may scan the whole partial index of open waits (measured: 0.9 ms a signal). Shared by
-- accept_signals and open_wait.
CREATE OR REPLACE FUNCTION "signalbox"."receive_wait"(p_wait_row tid, p_wait_id text, p_run_id text, p_signal_id text)
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
