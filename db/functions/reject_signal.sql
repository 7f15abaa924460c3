-- A rejection in the signal log (never numbered); returns its id. The one writer of rejections
-- (intake's SQL path, and src/signals/signals.queries.ts insertRejectedSignal for the others).
-- Anyone may cause one (a type with auth none, a signal to a run that waits for nothing), so a
-- rejection keeps its payload only up to rejected_payload_max_bytes(); past that, the size and
-- the digest (payload_hash) are what is kept. Accepted signals keep their whole payload.
DROP FUNCTION IF EXISTS "signalbox"."reject_signal"(text, text, text, text, text, text, text); -- before p_validation_errors
CREATE OR REPLACE FUNCTION "signalbox"."reject_signal"(
  p_id text, p_run_id text, p_signal text, p_outcome text, p_payload text, p_payload_hash text, p_key text,
  p_validation_errors jsonb DEFAULT NULL)
RETURNS text LANGUAGE sql AS $$
  INSERT INTO signalbox.signals (id, run_id, signal, outcome, payload, payload_hash, payload_bytes, idempotency_key, validation_errors)
    VALUES (p_id, p_run_id, p_signal, p_outcome,
            CASE WHEN octet_length(p_payload) <= signalbox.rejected_payload_max_bytes() THEN p_payload END,
            p_payload_hash,
            CASE WHEN octet_length(p_payload) > signalbox.rejected_payload_max_bytes() THEN octet_length(p_payload) END,
            p_key, p_validation_errors)
  RETURNING id;
$$;
