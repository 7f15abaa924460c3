-- The callbacks that waits resolved together owe, enqueued for the delivery runner
-- (src/delivery/delivery-engine.ts) in the transaction that resolved them: graphile-worker batch
-- jobs (an array payload of wait ids) of up to 100 waits each, in one add_jobs (one NOTIFY).
-- A batch is read in one query, sent per endpoint, and recorded in one statement; 10,000 waits
-- timing out together are 100 jobs, several delivery workers sharing them. No job key: a wait's
-- own key (`deliver:<id>`) is for its retries and redeliveries (record_delivery_attempt.sql,
-- src/waits/cancel-wait.ts); a wait delivered twice records its attempt once (the
-- compare-and-set on its attempt count), and the callback carries the same webhook-id.
CREATE OR REPLACE FUNCTION "signalbox"."enqueue_callbacks"(p_wait_ids text[])
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF coalesce(cardinality(p_wait_ids), 0) = 0 THEN
    RETURN;
  END IF;
  PERFORM signalbox.add_jobs(array(
    SELECT json_populate_record(NULL::graphile_worker.job_spec, json_build_object(
        'identifier', 'deliver_callback', 'payload', json_agg(t.id ORDER BY t.n), 'max_attempts', signalbox.job_max_attempts()))
      FROM unnest(p_wait_ids) WITH ORDINALITY AS t(id, n)
      GROUP BY (t.n - 1) / 100));
END;
$$;
