-- Values SQL and TypeScript share, written once here. The SQL functions call these (each is a
-- one-line IMMUTABLE SQL function, folded into the calling statement's plan); the TypeScript
-- names for them (src/jobs/enqueue.ts jobKeys and JOB_MAX_ATTEMPTS, src/events/change-feed.ts
-- channels, src/waits/resolve-waits.ts resolutions) are proven equal to these by
-- test/waits/shared-constants.test.ts, so the two languages cannot drift apart unnoticed.

-- The job key of a wait's (or a notification's, or a run start's) job: one pending job per key.
CREATE OR REPLACE FUNCTION "signalbox"."job_key"(p_task text, p_id text)
RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE p_task
    WHEN 'expire_wait' THEN 'expire:'
    WHEN 'deliver_callback' THEN 'deliver:'
    WHEN 'fire_timer' THEN 'timer:'
    WHEN 'poll_sensor' THEN 'sensor:'
    WHEN 'deliver_notification' THEN 'notify:'
    WHEN 'deliver_start' THEN 'start:'
  END || p_id;
$$;

-- graphile-worker attempts of every job signalbox enqueues (delivery retries are our own).
CREATE OR REPLACE FUNCTION "signalbox"."job_max_attempts"()
RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 25;
$$;

-- NOTIFY channel woken with a wait's id when it leaves `waiting` (long-polls).
CREATE OR REPLACE FUNCTION "signalbox"."wait_changed_channel"()
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 'signalbox_wait_changed';
$$;

-- NOTIFY channel woken with a run's id on every history event (SSE streams, checkpoints).
CREATE OR REPLACE FUNCTION "signalbox"."run_changed_channel"()
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 'signalbox_run_changed';
$$;

-- The history event recording a wait's resolution; NULL for anything that is not one.
CREATE OR REPLACE FUNCTION "signalbox"."resolution_event"(p_status text)
RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT CASE p_status
    WHEN 'received' THEN 'signal.received'
    WHEN 'timed_out' THEN 'signal.timeout'
    WHEN 'cancelled' THEN 'signal.cancelled'
  END;
$$;

-- A wait's delivery status as it resolves: a callback is owed when it has a callback_url.
CREATE OR REPLACE FUNCTION "signalbox"."delivery_status_on_resolve"(p_callback_url text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN p_callback_url IS NULL THEN 'none' ELSE 'pending' END;
$$;

-- An opaque id as src/core/ids.ts newId makes them: prefix, '_', 10 base32 characters of the
-- creation time in milliseconds, 16 random base32 characters.
CREATE OR REPLACE FUNCTION "signalbox"."new_id"(p_prefix text)
RETURNS text LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  c constant text := '0123456789abcdefghjkmnpqrstvwxyz';
  t bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
  r constant bytea := sha256(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()));
  v_time text := '';
  v_tail text := '';
BEGIN
  FOR k IN 1..10 LOOP
    v_time := substr(c, (t % 32)::int + 1, 1) || v_time;
    t := t / 32;
  END LOOP;
  FOR k IN 0..15 LOOP
    v_tail := v_tail || substr(c, get_byte(r, k) % 32 + 1, 1);
  END LOOP;
  RETURN p_prefix || '_' || v_time || v_tail;
END;
$$;

-- Tests only: with `signalbox.debug_points = on` (test databases set it; nothing else does) a
-- statement passing here waits while a test holds the advisory lock of (name, subject), so a
-- race happens in the order the test chooses inside SQL functions too (test/helpers/race-gates.ts
-- holdInSql). Off, it is one setting lookup.
CREATE OR REPLACE FUNCTION "signalbox"."debug_point"(p_name text, p_subject text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('signalbox.debug_points', true) = 'on' THEN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended(p_name || ':' || p_subject, 0));
  END IF;
END;
$$;

-- The largest payload a rejected signal keeps (db/functions/reject_signal.sql); a larger one
-- keeps its size and digest only.
CREATE OR REPLACE FUNCTION "signalbox"."rejected_payload_max_bytes"()
RETURNS int LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 4096;
$$;
