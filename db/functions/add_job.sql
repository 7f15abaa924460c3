-- graphile-worker's add_job and add_jobs with generic plans: with an array argument Postgres
-- otherwise re-plans add_jobs' statements on every call (a custom plan always looks cheaper),
-- which was half the time of a one-signal intake. Generic plans are safe there (lookups by the
-- unique job key); not for our own statements, whose generic plans, made while a table is
-- nearly empty, can pick the status index over the primary key. How accept_signals and
-- src/jobs/enqueue.ts call graphile-worker, with the same arguments and results.
CREATE OR REPLACE FUNCTION "signalbox"."add_job"(p_identifier text, p_payload json, p_run_at timestamptz, p_max_attempts int, p_job_key text, p_job_key_mode text)
RETURNS graphile_worker._private_jobs LANGUAGE sql
SET plan_cache_mode = force_generic_plan
AS $$
  SELECT * FROM graphile_worker.add_job(p_identifier, p_payload, run_at := p_run_at, max_attempts := p_max_attempts, job_key := p_job_key, job_key_mode := p_job_key_mode);
$$;

CREATE OR REPLACE FUNCTION "signalbox"."add_jobs"(p_specs graphile_worker.job_spec[])
RETURNS SETOF graphile_worker._private_jobs LANGUAGE sql
SET plan_cache_mode = force_generic_plan
AS $$
  SELECT * FROM graphile_worker.add_jobs(p_specs);
$$;
