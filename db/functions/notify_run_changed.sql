-- Every history event wakes whoever watches its run (SSE streams, checkpoints), in this process
-- or any other: NOTIFY is transactional, so it is delivered only once the event commits.
CREATE OR REPLACE FUNCTION "signalbox"."notify_run_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify(signalbox.run_changed_channel(), NEW.run_id);
  RETURN NULL;
END;
$$;
