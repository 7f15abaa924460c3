-- Queues the next attempt of a delivery that may still pass (a callback, a run start): attempt
-- n+1 of a round after backoff × 2^(n-1) s, at most an hour (src/delivery/classify-response.ts
-- retryDelayS), as job `p_task` for `p_id` under its job key (a pending retry is replaced).
-- p_attempt is the attempt just recorded, p_round_start where its round began. An attempt that
-- is its round's start (an earlier round's, recorded after a redelivery began the round: no
-- attempt of this round yet) queues the next one now: its job replaces the redelivery's, which
-- was due now (POST .../redeliver answered 202 for "sends now").
CREATE OR REPLACE FUNCTION "signalbox"."queue_next_attempt"(p_task text, p_id text, p_attempt int, p_round_start int, p_backoff_s double precision)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF (SELECT j.id FROM signalbox.add_job(
        p_task, json_build_object('id', p_id),
        now() + CASE WHEN p_attempt = p_round_start THEN 0
                     ELSE least(3600, p_backoff_s * 2 ^ greatest(0, p_attempt - p_round_start - 1)) END * interval '1 second',
        signalbox.job_max_attempts(), signalbox.job_key(p_task, p_id), 'replace') j) IS NULL THEN
    -- graphile/worker#580: under contention on one key add_job can return no job; the caller retries.
    RAISE EXCEPTION 'add_job returned no job' USING ERRCODE = '40001';
  END IF;
END;
$$;

-- A delivery's status after attempt p_attempt answered p_verdict (delivered | retry | failed):
-- delivered; pending while a retry still fits in the round (p_max_attempts per round, from
-- p_round_start); failed otherwise. One rule for callbacks (both recorders) and run starts.
CREATE OR REPLACE FUNCTION "signalbox"."delivery_status_after"(p_verdict text, p_attempt int, p_round_start int, p_max_attempts int)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN p_verdict = 'delivered' THEN 'delivered'
    WHEN p_verdict = 'retry' AND p_attempt - p_round_start < p_max_attempts THEN 'pending'
    ELSE 'failed' END;
$$;

-- Whether an attempt that did not deliver was sent in an earlier round than the delivery's
-- current one: a redelivery began a round (delivery_round moved on) while it was in flight.
-- Its answer is history, not the new round's: it neither fails nor counts against that round,
-- which must still send (the redelivery answered 202 for it). A delivered answer settles the
-- delivery whichever round sent it: the endpoint has the event.
-- p_round_before NULL: a caller that does not say (an older release): never an earlier round's.
CREATE OR REPLACE FUNCTION "signalbox"."sent_in_earlier_round"(p_verdict text, p_round_before int, p_round int)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
  SELECT p_verdict <> 'delivered' AND p_round_before IS NOT NULL AND p_round <> p_round_before;
$$;
