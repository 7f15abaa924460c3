-- The one way a wait leaves `waiting`. Every caller goes through here: intake (accept_signals),
-- opening a wait that meets a buffered signal or a past deadline (open_wait, and
-- src/waits/open-wait.ts), timeouts, cancels, composites, quorum, timers and sensors
-- (src/waits/resolve-waits.ts is the thin TypeScript wrapper, as graphile-worker's addJob is
-- over add_job).
--
-- For the waits given, in one call: the compare-and-set on status (whichever of signal,
-- timeout or cancel commits first wins; the others change nothing), the history event, the
-- wake-up (NOTIFY), removing the wait's own pending jobs (timeout, timer, sensor poll: an
-- optimisation, a job already running loses its compare-and-set), one add_jobs for the
-- callbacks (or, handed off, jobs the caller runs itself: enqueue_callbacks), and the
-- composites: a parent that ended cancels its open members, a member that resolved may settle
-- its parent. Returns the waits it resolved (not those it settled in turn), each with the job
-- of its callback when handed off. The caller holds the runs' locks.
--
-- Set-based: one statement for all the waits given, one for their jobs, one NOTIFY per 200
-- waits, whatever their number (a statement per wait cost 1,000 timeouts 150 ms of Postgres
-- CPU, now 55). Rows are found by ctid (signalbox.waits_to_resolve): callers that found them
-- under the run lock pass them (p_rows); otherwise they are looked up by primary key with a
-- plan made for these ids (EXECUTE). A cached generic plan for `id = $1 AND status = 'waiting'`
-- made while the table was nearly empty scanned the whole partial index of open waits (0.9 ms
-- a signal at 4,000 open waits).
DROP FUNCTION IF EXISTS "signalbox"."receive_wait"(tid, text, text, text); -- replaced by this one

-- The waits resolve_waits is given, those found, in p_ids' order, each with its history
-- event's id (drawn in that order, so a run's history lists them as given; one drawn for a
-- wait that had left `waiting` already is a gap, as a rolled-back event leaves). Declared to
-- return one row (it is not inlined: nextval is volatile), so every plan of resolve_waits'
-- update, the generic one cached while `waits` was nearly empty included, joins each to its
-- row by a TID scan: estimated at ten rows (unnest's guess), the generic plan made on a nearly
-- empty table scanned the partial index of open waits instead.
CREATE OR REPLACE FUNCTION "signalbox"."waits_to_resolve"(p_ids text[], p_rows tid[], p_signal_ids text[])
RETURNS TABLE (id text, "row" tid, signal_id text, event_id bigint) LANGUAGE sql ROWS 1 AS $$
  SELECT t.id, t.row, t.signal_id, nextval(pg_get_serial_sequence('signalbox.events', 'id'))
    FROM unnest(p_ids, p_rows, p_signal_ids) AS t(id, row, signal_id)
    WHERE t.row IS NOT NULL;
$$;

-- Its result gained each wait's callback job (callback_job), and a result type cannot be
-- replaced in place: dropped first (callers find it by name again).
DROP FUNCTION IF EXISTS "signalbox"."resolve_waits"(text[], text, text[], jsonb, tid[], boolean);
CREATE OR REPLACE FUNCTION "signalbox"."resolve_waits"(
  p_ids text[],                        -- the waits
  p_status text,                       -- received | timed_out | cancelled
  p_signal_ids text[] DEFAULT NULL,    -- received: the signal of each wait, in p_ids' order
  p_data jsonb DEFAULT '{}'::jsonb,    -- the history event's data
  p_rows tid[] DEFAULT NULL,           -- their ctids, in p_ids' order, when the caller has them
  p_due_only boolean DEFAULT false,    -- timeouts: only a wait whose deadline has passed
  p_hand_off_s double precision DEFAULT NULL) -- the caller runs the callbacks' jobs itself (enqueue_callbacks)
RETURNS TABLE (id text, timeout_at timestamptz, resolved_at timestamptz, callback_job bigint) LANGUAGE plpgsql
-- Generic plans: every statement here reaches its rows by ctid or by a unique index on what
-- it looks up, in any plan; custom plans were re-planned on every call (0.4 ms each).
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
  v_event constant text := signalbox.resolution_event(p_status);
  v_rows tid[] := p_rows;
  v_resolved text[];
  v_timeouts timestamptz[];
  v_jobs text[];
  v_callbacks text[];
  v_callback_jobs bigint[];
  v_callback_waits text[];
  v_composites text[];
  v_parents text[];
  v_members text[];
  v_member_rows tid[];
  v_parent text;
BEGIN
  IF v_event IS NULL THEN
    RAISE EXCEPTION 'resolve_waits: % is not how a wait resolves', p_status;
  END IF;
  IF coalesce(cardinality(p_ids), 0) = 0 THEN
    RETURN;
  END IF;
  IF v_rows IS NULL THEN
    EXECUTE 'SELECT array_agg(w.ctid ORDER BY t.n) FROM unnest($1) WITH ORDINALITY AS t(id, n) LEFT JOIN signalbox.waits w ON w.id = t.id'
      INTO v_rows USING p_ids;
  END IF;

  -- The compare-and-set and the history events.
  WITH t AS MATERIALIZED (
    SELECT * FROM signalbox.waits_to_resolve(p_ids, v_rows, p_signal_ids)
  ), w AS (
    UPDATE signalbox.waits w SET
        status = p_status,
        resolved_at = now(),
        signal_id = t.signal_id,
        resolution_event_id = t.event_id,
        delivery_status = signalbox.delivery_status_on_resolve(w.callback_url)
      FROM t
      WHERE w.ctid = t.row AND w.id = t.id
        AND w.status = 'waiting' AND (NOT p_due_only OR w.timeout_at <= now())
      RETURNING w.id, w.run_id, w.signal_id, w.resolution_event_id, w.resolved_at, w.timeout_at, w.kind, w.callback_url, w.parent_wait_id
  ), e AS (
    INSERT INTO signalbox.events (id, run_id, type, wait_id, signal_id, data, occurred_at)
      SELECT w.resolution_event_id, w.run_id, v_event, w.id, w.signal_id, p_data, w.resolved_at FROM w
  )
  SELECT array_agg(w.id), array_agg(w.timeout_at),
         -- Their own pending jobs (timeout, timer, sensor poll) would only find them resolved.
         array_agg(signalbox.job_key('expire_wait', w.id)) FILTER (WHERE w.timeout_at IS NOT NULL)
           || array_agg(signalbox.job_key(CASE w.kind WHEN 'timer' THEN 'fire_timer' ELSE 'poll_sensor' END, w.id)) FILTER (WHERE w.kind IN ('timer', 'sensor')),
         array_agg(w.id) FILTER (WHERE w.callback_url IS NOT NULL),
         array_agg(w.id) FILTER (WHERE w.kind IN ('all', 'any')),
         array_agg(DISTINCT w.parent_wait_id) FILTER (WHERE w.parent_wait_id IS NOT NULL)
    INTO v_resolved, v_timeouts, v_jobs, v_callbacks, v_composites, v_parents
    FROM w;
  IF v_resolved IS NULL THEN
    RETURN; -- all had left `waiting` already: this call changes nothing
  END IF;

  -- The wake-up: one NOTIFY carries up to 200 wait ids, comma-separated (ids are 29
  -- characters: within NOTIFY's 8,000 bytes; src/events/change-feed.ts splits them).
  PERFORM pg_notify(signalbox.wait_changed_channel(), string_agg(r.id, ','))
    FROM unnest(v_resolved) WITH ORDINALITY AS r(id, n)
    GROUP BY (r.n - 1) / 200;
  -- Their jobs: those waiting to run deleted in one statement (remove_job takes a call per
  -- job and NOTIFYs the workers for each it deletes); then remove_job for one running now
  -- (locked), which loses its compare-and-set: it frees its key and keeps it from a retry.
  IF v_jobs IS NOT NULL THEN
    PERFORM graphile_worker.complete_jobs(array(SELECT j.id FROM graphile_worker.jobs j WHERE j.key = ANY (v_jobs)));
    PERFORM graphile_worker.remove_job(j.key) FROM graphile_worker.jobs j WHERE j.key = ANY (v_jobs);
  END IF;

  -- One add_jobs (one NOTIFY to the workers) for every callback, or jobs the caller runs itself.
  IF v_callbacks IS NOT NULL THEN
    SELECT array_agg(c.job_id), array_agg(c.wait_id) INTO v_callback_jobs, v_callback_waits
      FROM signalbox.enqueue_callbacks(v_callbacks, p_hand_off_s) c;
  END IF;

  -- A composite that ended takes its open members with it, found with a plan made for these
  -- composites (EXECUTE, not the generic plan). (OFFSET 0: the status test stays outside, so
  -- no plan can pick the partial index of open waits for it.)
  IF v_composites IS NOT NULL THEN
    EXECUTE 'SELECT array_agg(m.id ORDER BY m.created_at, m.id), array_agg(m.ctid ORDER BY m.created_at, m.id)
      FROM (SELECT w.id, w.ctid, w.created_at, w.status FROM signalbox.waits w WHERE w.parent_wait_id = ANY ($1) OFFSET 0) AS m
      WHERE m.status = ''waiting'''
      INTO v_members, v_member_rows USING v_composites;
    PERFORM signalbox.resolve_waits(v_members, 'cancelled', NULL,
      jsonb_build_object('reason', 'the composite wait it belongs to was settled'), v_member_rows);
  END IF;
  -- A member that resolved may settle its parent.
  IF v_parents IS NOT NULL THEN
    FOREACH v_parent IN ARRAY v_parents LOOP
      PERFORM signalbox.settle_composite(v_parent);
    END LOOP;
  END IF;

  RETURN QUERY SELECT r.id, r.timeout_at, now(), c.job_id
    FROM unnest(v_resolved, v_timeouts) WITH ORDINALITY AS r(id, timeout_at, n)
    LEFT JOIN unnest(v_callback_waits, v_callback_jobs) AS c(wait_id, job_id) ON c.wait_id = r.id
    ORDER BY r.n;
END;
$$;

-- A wait received with a payload signalbox raised itself (a timer, a sensor, a composite): the
-- payload is recorded as an accepted signal of the run with its next sequence, then the wait
-- resolves with it. The caller holds the run's lock and saw the wait waiting: otherwise this
-- raises and the transaction rolls back.
DROP FUNCTION IF EXISTS "signalbox"."receive_raised"(text, text); -- it returned the wait, which no caller read
CREATE OR REPLACE FUNCTION "signalbox"."receive_raised"(p_wait_id text, p_payload text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_run text;
  v_signal text;
  v_row tid;
  v_id text := signalbox.new_id('sg');
  v_seq bigint;
BEGIN
  SELECT w.run_id, w.signal, w.ctid INTO v_run, v_signal, v_row FROM signalbox.waits w WHERE w.id = p_wait_id;
  UPDATE signalbox.runs SET last_sequence = last_sequence + 1 WHERE run_id = v_run RETURNING last_sequence INTO v_seq;
  INSERT INTO signalbox.signals (id, run_id, signal, sequence, outcome, payload, wait_id)
    VALUES (v_id, v_run, v_signal, v_seq, 'received', p_payload, p_wait_id);
  PERFORM FROM signalbox.resolve_waits(ARRAY[p_wait_id], 'received', ARRAY[v_id], '{}'::jsonb, ARRAY[v_row]);
  IF NOT FOUND THEN
    RAISE EXCEPTION 'wait % was not waiting', p_wait_id;
  END IF;
END;
$$;

-- Composite waits follow their members. `any` is received with the first received member;
-- `all` when every member is received, and times out (or is cancelled) as soon as one member
-- does; received with {"members": {<signal>: <result>}}. Members share the parent's run, whose
-- lock the caller holds, so two members resolving at once settle the parent once.
CREATE OR REPLACE FUNCTION "signalbox"."settle_composite"(p_parent_id text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  v_parent record;
  v_total int;
  v_received int;
  v_ended int;
  v_timed_out boolean;
  v_payload json;
BEGIN
  SELECT w.ctid AS row, w.kind, w.status INTO v_parent FROM signalbox.waits w WHERE w.id = p_parent_id;
  IF NOT FOUND OR v_parent.status <> 'waiting' THEN
    RETURN;
  END IF;
  SELECT count(*), count(*) FILTER (WHERE m.status = 'received'),
         count(*) FILTER (WHERE m.status NOT IN ('waiting', 'received')), coalesce(bool_or(m.status = 'timed_out'), false)
    INTO v_total, v_received, v_ended, v_timed_out
    FROM signalbox.waits m WHERE m.parent_wait_id = p_parent_id;

  IF (v_parent.kind = 'any' AND v_received > 0) OR (v_parent.kind <> 'any' AND v_ended = 0 AND v_received = v_total) THEN
    -- Each received member's result as the API shows it (src/waits/wait-view.ts), oldest first.
    SELECT json_build_object('members', coalesce(json_object_agg(m.signal, json_build_object(
        'signal_id', m.signal_id, 'sequence', s.sequence, 'payload', s.payload::json,
        'received_at', to_char(s.received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) ORDER BY m.created_at, m.id), '{}'::json))
      INTO v_payload
      FROM signalbox.waits m JOIN signalbox.signals s ON s.id = m.signal_id
      WHERE m.parent_wait_id = p_parent_id AND m.status = 'received';
    PERFORM signalbox.receive_raised(p_parent_id, v_payload::text);
  ELSIF (v_parent.kind = 'any' AND v_ended = v_total) OR (v_parent.kind <> 'any' AND v_ended > 0) THEN
    PERFORM signalbox.resolve_waits(ARRAY[p_parent_id], CASE WHEN v_timed_out THEN 'timed_out' ELSE 'cancelled' END, NULL,
      jsonb_build_object('reason', 'a member wait ended without a signal'), ARRAY[v_parent.row]);
  END IF;
END;
$$;
