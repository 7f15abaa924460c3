-- Processes cache signal types; any change tells every process to drop its copy.
CREATE FUNCTION "signalbox"."notify_signal_type_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('signalbox_signal_type_changed', COALESCE(NEW.name, OLD.name));
  RETURN NULL;
END;
$$;
--> statement-breakpoint
CREATE TRIGGER "signal_types_notify_changed" AFTER INSERT OR UPDATE OR DELETE ON "signalbox"."signal_types"
  FOR EACH ROW EXECUTE FUNCTION "signalbox"."notify_signal_type_changed"();
