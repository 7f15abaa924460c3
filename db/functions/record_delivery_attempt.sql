-- Records one attempt to deliver a wait's callback (src/delivery/deliver-callback.ts), in one
-- round trip: the compare-and-set on the wait's attempt count, the attempt's row in
-- delivery_attempts, and, when another attempt is due, its job (graphile-worker, same key).
--
-- The compare-and-set is what makes an attempt number recorded once: two sends of the same
-- attempt (a redelivery racing an attempt in flight, or a job run twice after a crash) both
-- saw `delivery_attempts = p_attempts_before`; the first to commit records it, the second
-- matches no row and records nothing (its send still happened: delivery is at-least-once).
--
-- Whether a retryable answer is retried is decided here, from the row, not by the caller: a
-- redelivery may have started a new round (delivery_round_start) while the attempt was in flight,
-- and that round's count is the one SIGNALBOX_DELIVERY_MAX_ATTEMPTS and the backoff apply to.
-- An attempt a redelivery overtook (sent before the round began, answered after) is recorded as
-- history and leaves the delivery pending for the new round (signalbox.sent_in_earlier_round).
-- Returns the attempt's outcome (delivered, retry, failed) and number, or no row when the
-- compare-and-set lost.
--
-- Replies: a delivered attempt stores the answer's JSON body (p_reply; NULL when it had none)
-- as the wait's reply, and on the signal that resolved it, in this statement. The first
-- delivered attempt sets replied_at and the reply; a later one (a redelivery) changes neither,
-- so what a sender was told stays true. Once the delivery is settled (delivered or failed) the
-- wait's id is NOTIFYed, waking senders held for the reply (src/signals/await-reply.ts) in
-- every process.
DROP FUNCTION IF EXISTS "signalbox"."record_delivery_attempt"(text, int, text, int, text, int, text, int, double precision); -- it took no reply
DROP FUNCTION IF EXISTS "signalbox"."record_delivery_attempt"(text, int, text, int, text, int, text, int, double precision, jsonb); -- nor when it was sent
DROP FUNCTION IF EXISTS "signalbox"."record_delivery_attempt"(text, int, text, int, text, int, text, int, double precision, jsonb, int); -- nor in which round
CREATE OR REPLACE FUNCTION "signalbox"."record_delivery_attempt"(
  p_wait_id text,
  p_attempts_before int,           -- the wait's delivery_attempts when the attempt began
  p_verdict text,                  -- what the answer says: delivered | retry | failed
  p_status_code int,               -- null: no answer (refused, reset, timed out)
  p_error text,
  p_duration_ms int,
  p_callback_host text,
  p_max_attempts int,              -- SIGNALBOX_DELIVERY_MAX_ATTEMPTS, per round
  p_backoff_s double precision,    -- SIGNALBOX_DELIVERY_BACKOFF_S
  p_reply jsonb DEFAULT NULL,      -- delivered: the answer's JSON body; NULL when none
  p_sent_ms_ago int DEFAULT NULL,  -- how long ago it was sent (a batch is recorded once its last answer came); NULL: p_duration_ms
  p_round_before int DEFAULT NULL) -- the wait's delivery_round when the attempt began (signalbox.sent_in_earlier_round)
-- signalbox calls it only through record_delivery_attempts, whose settings it runs under (generic
-- plans, every row reached by its key): settings of its own would be set and restored again on
-- every call.
RETURNS TABLE (outcome text, attempt int, round_attempt int) LANGUAGE plpgsql AS $$
DECLARE
  v_attempt constant int := p_attempts_before + 1;
  v_status text;
  v_round_start int;
  v_event_id bigint;
  v_outcome text;
  v_signal_id text;
  v_reply jsonb;
BEGIN
  UPDATE signalbox.waits w SET
      delivery_attempts = v_attempt,
      -- An earlier round's attempt leaves the delivery pending, and the round counts from after it.
      delivery_status = CASE WHEN signalbox.sent_in_earlier_round(p_verdict, p_round_before, w.delivery_round) THEN 'pending'
        ELSE signalbox.delivery_status_after(p_verdict, v_attempt, w.delivery_round_start, p_max_attempts) END,
      delivery_round_start = CASE WHEN signalbox.sent_in_earlier_round(p_verdict, p_round_before, w.delivery_round) THEN v_attempt
        ELSE w.delivery_round_start END,
      delivery_last_error = p_error,
      -- The first delivered answer only (evaluated on the row as locked: two deliveries cannot both be first).
      reply = CASE WHEN p_verdict = 'delivered' AND w.replied_at IS NULL THEN p_reply ELSE w.reply END,
      replied_at = CASE WHEN p_verdict = 'delivered' THEN coalesce(w.replied_at, now()) ELSE w.replied_at END
    WHERE w.id = p_wait_id AND w.delivery_status = 'pending' AND w.delivery_attempts = p_attempts_before
    RETURNING w.delivery_status, w.delivery_round_start, w.resolution_event_id, w.signal_id, w.reply
      INTO v_status, v_round_start, v_event_id, v_signal_id, v_reply;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  v_outcome := CASE v_status WHEN 'pending' THEN 'retry' ELSE v_status END;

  IF v_outcome <> 'retry' THEN
    -- The signal keeps the wait's reply (a NULL one is already so: nothing is written for it).
    IF v_reply IS NOT NULL AND v_signal_id IS NOT NULL THEN
      UPDATE signalbox.signals s SET reply = v_reply WHERE s.id = v_signal_id AND s.reply IS DISTINCT FROM v_reply;
    END IF;
    PERFORM pg_notify(signalbox.wait_changed_channel(), p_wait_id);
  END IF;

  IF p_attempts_before > 0 THEN
    -- The previous attempt is no longer the wait's latest: it leaves the listing of failing deliveries.
    UPDATE signalbox.delivery_attempts a SET latest = false
      WHERE a.wait_id = p_wait_id AND a.attempt = p_attempts_before AND a.latest;
  END IF;
  INSERT INTO signalbox.delivery_attempts (wait_id, attempt, event_id, started_at, duration_ms, status_code, error, outcome, callback_host)
    VALUES (p_wait_id, v_attempt, v_event_id, now() - coalesce(p_sent_ms_ago, p_duration_ms) * interval '1 millisecond', p_duration_ms, p_status_code, p_error, v_outcome, p_callback_host);

  IF v_outcome = 'retry' THEN
    PERFORM signalbox.queue_next_attempt('deliver_callback', p_wait_id, v_attempt, v_round_start, p_backoff_s);
  END IF;

  outcome := v_outcome;
  attempt := v_attempt;
  round_attempt := v_attempt - v_round_start;
  RETURN NEXT;
END;
$$;

-- Several attempts in one round trip (the delivery engine records what a batch of sends
-- answered together): each item as record_delivery_attempt would record it, reply and NOTIFY
-- included (one NOTIFY per 200 settled waits); n is the item's position (1-based), and an
-- item whose compare-and-set lost returns no row.
--
-- Set-based: one UPDATE of the waits (the compare-and-set of every item), one UPDATE of their
-- previous attempts, one INSERT of the new ones, then add_job for each retry (rare). Recording
-- 100 attempts so costs a few statements rather than 300 (a timer burst of 10,000 callbacks).
-- A single item (a callback sent alone) goes straight to record_delivery_attempt, which is
-- cheaper for one (0.5 ms against 0.85; 100 items: 4.6 ms against 10.7 one by one); so does a
-- call naming a wait twice (the engine never does), item by item, in order.
--
-- p_complete_jobs: callback jobs a process ran itself (handed off by intake) that these
-- records settle, completed in the same transaction (signalbox.complete_handed_off): one commit
-- for both (src/delivery/delivery-engine.ts).
-- The parameter was added: dropped first, or a call with three arguments would match two.
DROP FUNCTION IF EXISTS "signalbox"."record_delivery_attempts"(json, int, double precision);
CREATE OR REPLACE FUNCTION "signalbox"."record_delivery_attempts"(
  p_items json,                    -- [{wait_id, attempts_before, verdict, status_code, error, duration_ms, callback_host, reply, sent_ms_ago, round_before}]
  p_max_attempts int,
  p_backoff_s double precision,
  p_complete_jobs bigint[] DEFAULT NULL)
RETURNS TABLE (n int, outcome text, attempt int, round_attempt int) LANGUAGE plpgsql
-- Planned once per session, every row reached by its key (as signalbox.callback_reads): a
-- custom plan each call cost a record 0.1-0.7 ms of planning.
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off AS $$
DECLARE
  r record;
  v_n int[];
  v_wait_ids text[];
  v_outcomes text[];
  v_attempts int[];
  v_round_starts int[];
  v_settled text[];
BEGIN
  IF p_complete_jobs IS NOT NULL THEN
    PERFORM signalbox.complete_handed_off(p_complete_jobs);
  END IF;
  IF json_array_length(p_items) = 1 OR (SELECT count(*) <> count(DISTINCT e ->> 'wait_id') FROM json_array_elements(p_items) AS e) THEN
    FOR r IN
      SELECT t.*, k.n AS item FROM json_array_elements(p_items) WITH ORDINALITY AS k(e, n),
        json_to_record(k.e) AS t(wait_id text, attempts_before int, verdict text, status_code int, error text, duration_ms int, callback_host text, reply jsonb, sent_ms_ago int, round_before int)
      ORDER BY k.n
    LOOP
      RETURN QUERY SELECT r.item::int, a.outcome, a.attempt, a.round_attempt FROM signalbox.record_delivery_attempt(
        r.wait_id, r.attempts_before, r.verdict, r.status_code, r.error, r.duration_ms, r.callback_host, p_max_attempts, p_backoff_s, r.reply, r.sent_ms_ago, r.round_before) a;
    END LOOP;
    RETURN;
  END IF;

  WITH items AS (
    SELECT k.n::int AS n, t.* FROM json_array_elements(p_items) WITH ORDINALITY AS k(e, n),
      json_to_record(k.e) AS t(wait_id text, attempts_before int, verdict text, status_code int, error text, duration_ms int, callback_host text, reply jsonb, sent_ms_ago int, round_before int)
  ), cas AS (
    -- The compare-and-set of each item, as in record_delivery_attempt.
    UPDATE signalbox.waits w SET
        delivery_attempts = i.attempts_before + 1,
        delivery_status = CASE WHEN signalbox.sent_in_earlier_round(i.verdict, i.round_before, w.delivery_round) THEN 'pending'
          ELSE signalbox.delivery_status_after(i.verdict, i.attempts_before + 1, w.delivery_round_start, p_max_attempts) END,
        delivery_round_start = CASE WHEN signalbox.sent_in_earlier_round(i.verdict, i.round_before, w.delivery_round) THEN i.attempts_before + 1
          ELSE w.delivery_round_start END,
        delivery_last_error = i.error,
        reply = CASE WHEN i.verdict = 'delivered' AND w.replied_at IS NULL THEN i.reply ELSE w.reply END,
        replied_at = CASE WHEN i.verdict = 'delivered' THEN coalesce(w.replied_at, now()) ELSE w.replied_at END
      FROM items i
      WHERE w.id = i.wait_id AND w.delivery_status = 'pending' AND w.delivery_attempts = i.attempts_before
      RETURNING i.n, w.id, i.attempts_before, w.delivery_status, w.delivery_round_start, w.resolution_event_id,
        i.status_code, i.error, i.duration_ms, i.sent_ms_ago, i.callback_host, w.signal_id, w.reply
  ), replies AS (
    -- The signals keep their waits' replies, as in record_delivery_attempt.
    UPDATE signalbox.signals s SET reply = c.reply
      FROM cas c
      WHERE c.delivery_status <> 'pending' AND c.reply IS NOT NULL AND s.id = c.signal_id AND s.reply IS DISTINCT FROM c.reply
  ), previous AS (
    -- The previous attempts are no longer their waits' latest: they leave the listing of failing deliveries.
    UPDATE signalbox.delivery_attempts a SET latest = false
      FROM cas c
      WHERE c.attempts_before > 0 AND a.wait_id = c.id AND a.attempt = c.attempts_before AND a.latest
  ), recorded AS (
    INSERT INTO signalbox.delivery_attempts (wait_id, attempt, event_id, started_at, duration_ms, status_code, error, outcome, callback_host)
      SELECT c.id, c.attempts_before + 1, c.resolution_event_id, now() - coalesce(c.sent_ms_ago, c.duration_ms) * interval '1 millisecond', c.duration_ms,
          c.status_code, c.error, CASE c.delivery_status WHEN 'pending' THEN 'retry' ELSE c.delivery_status END, c.callback_host
        FROM cas c
  )
  SELECT array_agg(c.n ORDER BY c.n), array_agg(c.id ORDER BY c.n),
      array_agg(CASE c.delivery_status WHEN 'pending' THEN 'retry' ELSE c.delivery_status END ORDER BY c.n),
      array_agg(c.attempts_before + 1 ORDER BY c.n), array_agg(c.delivery_round_start ORDER BY c.n),
      array_agg(c.id) FILTER (WHERE c.delivery_status <> 'pending')
    INTO v_n, v_wait_ids, v_outcomes, v_attempts, v_round_starts, v_settled
    FROM cas c;
  -- Senders held for these replies wake: one NOTIFY per 200 waits (src/events/change-feed.ts splits them).
  PERFORM pg_notify(signalbox.wait_changed_channel(), string_agg(u.id, ','))
    FROM unnest(v_settled) WITH ORDINALITY AS u(id, n)
    GROUP BY (u.n - 1) / 200;

  FOR i IN 1 .. coalesce(cardinality(v_n), 0) LOOP
    IF v_outcomes[i] = 'retry' THEN
      PERFORM signalbox.queue_next_attempt('deliver_callback', v_wait_ids[i], v_attempts[i], v_round_starts[i], p_backoff_s);
    END IF;
    n := v_n[i];
    outcome := v_outcomes[i];
    attempt := v_attempts[i];
    round_attempt := v_attempts[i] - v_round_starts[i];
    RETURN NEXT;
  END LOOP;
END;
$$;
