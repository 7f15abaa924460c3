-- A rejection in the signal log (never numbered); returns its id.
CREATE OR REPLACE FUNCTION "signalbox"."reject_signal"(p_id text, p_run_id text, p_signal text, p_outcome text, p_payload text, p_payload_hash text, p_key text)
RETURNS text LANGUAGE sql AS $$
  INSERT INTO signalbox.signals (id, run_id, signal, outcome, payload, payload_hash, idempotency_key)
    VALUES (p_id, p_run_id, p_signal, p_outcome, p_payload, p_payload_hash, p_key)
  RETURNING id;
$$;
