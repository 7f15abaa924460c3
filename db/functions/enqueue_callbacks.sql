-- The callbacks that waits resolved together owe, enqueued for the delivery runner
-- (src/delivery/delivery-engine.ts) in the transaction that resolved them: graphile-worker batch
-- jobs (an array payload of wait ids) of up to 100 waits each, in one add_jobs (one NOTIFY).
-- A batch is read in one query, sent per endpoint, and recorded in one statement; 10,000 waits
-- timing out together are 100 jobs, several delivery workers sharing them. No job key: a wait's
-- own key (`deliver:<id>`) is for its retries and redeliveries (record_delivery_attempt.sql,
-- src/waits/cancel-wait.ts); a wait delivered twice records its attempt once (the
-- compare-and-set on its attempt count), and the callback carries the same webhook-id.
--
-- Handed off (p_hand_off_s): the caller's process runs the jobs itself as soon as the
-- transaction commits (src/delivery/delivery-engine.ts, take) and completes them, so they are
-- due only p_hand_off_s from now, for a worker to run should that process die first. A job not
-- due yet needs no NOTIFY (no worker could take it), so they are inserted as add_jobs inserts
-- them, without one (as signalbox.add_job inserts a future keyed job); each wait comes back with
-- its job. Until graphile-worker has seen the task (a fresh database) they go through add_jobs.
-- The result changed from nothing to the jobs: a result type cannot be replaced in place.
DROP FUNCTION IF EXISTS "signalbox"."enqueue_callbacks"(text[]);
CREATE OR REPLACE FUNCTION "signalbox"."enqueue_callbacks"(p_wait_ids text[], p_hand_off_s double precision DEFAULT NULL)
RETURNS TABLE (job_id bigint, wait_id text) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_task int;
BEGIN
  IF coalesce(cardinality(p_wait_ids), 0) = 0 THEN
    RETURN;
  END IF;
  IF p_hand_off_s IS NOT NULL THEN
    SELECT t.id INTO v_task FROM graphile_worker._private_tasks t WHERE t.identifier = 'deliver_callback';
  END IF;
  IF v_task IS NULL THEN
    PERFORM signalbox.add_jobs(array(
      SELECT json_populate_record(NULL::graphile_worker.job_spec, json_build_object(
          'identifier', 'deliver_callback', 'payload', b.payload, 'max_attempts', signalbox.job_max_attempts()))
        FROM signalbox.callback_batches(p_wait_ids) b));
    RETURN;
  END IF;
  -- Each wait named at its first attempt ({id, attempts 0, round 0}: a wait resolving now has
  -- had none), as the delivery engine names those it lets go of: a worker that runs the job
  -- after its process recorded an attempt (that process was slow, or died before completing
  -- it) skips that wait, whose next attempt has a job of its own, rather than send it early.
  RETURN QUERY
    WITH jobs AS (
      INSERT INTO graphile_worker._private_jobs (task_id, payload, run_at, max_attempts)
        SELECT v_task,
            (SELECT json_agg(json_build_object('id', w.id, 'attempts', 0, 'round', 0)) FROM json_array_elements_text(b.payload) AS w(id)),
            now() + p_hand_off_s * interval '1 second', signalbox.job_max_attempts()
          FROM signalbox.callback_batches(p_wait_ids) b
        RETURNING id, payload
    )
    SELECT j.id, w.item ->> 'id' FROM jobs j, json_array_elements(j.payload) AS w(item);
END;
$$;

-- The payloads of the batch jobs for these waits: arrays of up to 100 wait ids, in order.
-- (IMMUTABLE: inlined into the statement that reads it.)
CREATE OR REPLACE FUNCTION "signalbox"."callback_batches"(p_wait_ids text[])
RETURNS TABLE (payload json) LANGUAGE sql IMMUTABLE AS $$
  SELECT json_agg(t.id ORDER BY t.n)
    FROM unnest(p_wait_ids) WITH ORDINALITY AS t(id, n)
    GROUP BY (t.n - 1) / 100
    ORDER BY (t.n - 1) / 100;
$$;

-- Completes callback jobs a process ran itself (handed off), as graphile-worker completes a
-- job: deleted, unless a worker has locked one meanwhile (it then runs it). Called by
-- record_delivery_attempts in the transaction of their record, or alone (src/jobs/enqueue.ts).
CREATE OR REPLACE FUNCTION "signalbox"."complete_handed_off"(p_job_ids bigint[])
RETURNS void LANGUAGE sql
-- Planned once per session, every row reached by its key (as signalbox.callback_reads).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
  DELETE FROM graphile_worker._private_jobs j WHERE j.id = ANY (p_job_ids) AND j.locked_at IS NULL;
$$;
