-- graphile-worker's add_job and add_jobs with generic plans: with an array argument Postgres
-- otherwise re-plans add_jobs' statements on every call (a custom plan always looks cheaper),
-- which was half the time of a one-signal intake. Generic plans are safe there (lookups by the
-- unique job key); not for our own statements, whose generic plans, made while a table is
-- nearly empty, can pick the status index over the primary key. How accept_signals and
-- src/jobs/enqueue.ts call graphile-worker, with the same arguments and results.
--
-- A job not due yet, under a key no job holds (a new wait's timeout, a timer) is inserted as
-- add_jobs inserts it, without add_jobs' NOTIFY "jobs:insert": that NOTIFY makes every worker
-- look for jobs at once, and none can find one that is not due; the workers poll
-- (SIGNALBOX_POLL_INTERVAL_MS) and find it when it is. Opening a wait with a timeout cost a
-- quarter more Postgres CPU than this and one wasted look for jobs per wait. Anything else (a
-- job due now, a key already taken, a task graphile-worker has not seen yet) goes through
-- add_job itself.
CREATE OR REPLACE FUNCTION "signalbox"."add_job"(p_identifier text, p_payload json, p_run_at timestamptz, p_max_attempts int, p_job_key text, p_job_key_mode text)
RETURNS graphile_worker._private_jobs LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  v_job graphile_worker._private_jobs;
BEGIN
  IF p_run_at > now() AND p_job_key IS NOT NULL THEN
    INSERT INTO graphile_worker._private_jobs AS jobs (task_id, payload, run_at, max_attempts, key)
      SELECT t.id, coalesce(p_payload, '{}'), p_run_at, coalesce(p_max_attempts, 25), p_job_key
        FROM graphile_worker._private_tasks t WHERE t.identifier = p_identifier
      ON CONFLICT (key) DO NOTHING
      RETURNING * INTO v_job;
    IF FOUND THEN
      RETURN v_job;
    END IF;
  END IF;
  SELECT * INTO v_job FROM graphile_worker.add_job(p_identifier, p_payload, run_at := p_run_at, max_attempts := p_max_attempts, job_key := p_job_key, job_key_mode := p_job_key_mode);
  RETURN v_job;
END;
$$;

CREATE OR REPLACE FUNCTION "signalbox"."add_jobs"(p_specs graphile_worker.job_spec[])
RETURNS SETOF graphile_worker._private_jobs LANGUAGE sql
SET plan_cache_mode = force_generic_plan
AS $$
  SELECT * FROM graphile_worker.add_jobs(p_specs);
$$;
