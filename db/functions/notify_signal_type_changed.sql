-- Processes cache signal types; any change tells every process to drop its copy.
CREATE OR REPLACE FUNCTION "signalbox"."notify_signal_type_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('signalbox_signal_type_changed', COALESCE(NEW.name, OLD.name));
  RETURN NULL;
END;
$$;
