-- Timeouts found from the index of open deadlines (waits_open_deadline) rather than one job per
-- wait. One graphile-worker job, the deadline alarm (task `expire_due`, key 'expire_due'), is
-- due at the earliest open deadline or before it. When it runs it times out every due wait that
-- relies on it (runDeadlineAlarm, src/timeouts/expire-wait.ts; a wait with a job of its own is
-- left to that job) and arms itself again for the next deadline.
--
-- Opening a wait whose deadline is at or after the alarm's needs no job of its own: the alarm
-- fires first, and when it arms itself again it does so no later than that deadline. The alarm
-- runs at least once a minute (deadline_alarm_idle_s); a deadline within that minute, or before
-- the alarm's, or with no alarm pending (none yet, running, failing) gets its own `expire_wait`
-- job, as every timed wait did before. Either way the timeout is a graphile-worker job that
-- survives restarts, and a wait times out once (resolve_waits' compare-and-set).
--
-- The race this must not lose: a wait relies on the alarm, and the alarm runs and arms itself
-- for a later deadline before that wait commits (its query did not see it). An advisory lock
-- orders the two: an opener relying on the alarm holds it shared until it commits; the alarm
-- moves freely only while it holds it exclusively, so after every such opener committed, and
-- its query sees their waits. When it cannot have the lock at once (openers keep it held while
-- waits are being opened), it never waits for them: it moves no later than a minute after the
-- oldest holder's transaction began (deadline_alarm_holders_allow), since an opener relies on
-- the alarm only for a deadline a minute or more after that, and no later than the pending
-- alarm an opener may still be reading. (It used to move no later than a moment from now: it
-- then ran ten times a second while waits were being opened, and a fifth of the timed waits got
-- a job of their own because it was running when they looked.) An opener waits at most for the
-- alarm's one arming statement.

-- The advisory lock's key (any constant; pg_locks shows it as objid 5910 in class 0).
CREATE OR REPLACE FUNCTION "signalbox"."deadline_alarm_lock"()
RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 5910::bigint;
$$;

-- The alarm is armed at most this far ahead. A deadline sooner than this keeps its own job: the
-- alarm need not run more often than once a minute for the waits that rely on it.
CREATE OR REPLACE FUNCTION "signalbox"."deadline_alarm_idle_s"()
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 60::double precision;
$$;

-- When nothing tells how far the alarm may move while openers hold its lock, or a due wait's
-- run was busy: the alarm looks again this soon.
CREATE OR REPLACE FUNCTION "signalbox"."deadline_alarm_busy_s"()
RETURNS double precision LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT 0.1::double precision;
$$;

-- While openers hold the alarm's lock (their waits not yet seen): the latest the alarm may be
-- armed for. Each relies on it only for a deadline a minute or more after its transaction began
-- (cover_deadline), so a minute after the oldest holder's began, less a second (the moment
-- between its start and its report to pg_stat_activity). NULL when that cannot be known: no
-- holder in share mode (another arming holds it), or one whose start is not shown (a prepared
-- transaction, another role's backend without pg_read_all_stats). Read before the deadlines
-- are: an opener that commits in between is seen by one or the other.
CREATE OR REPLACE FUNCTION "signalbox"."deadline_alarm_holders_allow"()
RETURNS timestamptz LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN count(*) > 0 AND bool_and(a.xact_start IS NOT NULL)
              THEN min(a.xact_start) + (signalbox.deadline_alarm_idle_s() - 1) * interval '1 second' END
  FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
  WHERE l.locktype = 'advisory' AND l.granted AND l.mode = 'ShareLock'
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = 0 AND l.objid = signalbox.deadline_alarm_lock() AND l.objsubid = 1;
$$;

-- What times a new wait out (open_wait, src/waits/open-wait.ts): the alarm, when it is pending
-- and due no later than the deadline, for a deadline a minute away or more; otherwise the wait's
-- own job. In the opening transaction.
CREATE OR REPLACE FUNCTION "signalbox"."cover_deadline"(p_wait_id text, p_deadline timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  IF p_deadline >= now() + signalbox.deadline_alarm_idle_s() * interval '1 second' THEN
    PERFORM pg_advisory_xact_lock_shared(signalbox.deadline_alarm_lock());
    PERFORM FROM graphile_worker._private_jobs j
      WHERE j.key = 'expire_due' AND j.locked_at IS NULL AND j.attempts < j.max_attempts AND j.run_at <= p_deadline;
    IF FOUND THEN
      RETURN;
    END IF;
  END IF;
  -- graphile/worker#580: add_job may return no job under contention on its key; roll back.
  IF (SELECT j.id FROM signalbox.add_job('expire_wait', json_build_object('id', p_wait_id), p_deadline, signalbox.job_max_attempts(),
                                         signalbox.job_key('expire_wait', p_wait_id), 'replace') j) IS NULL THEN
    RAISE EXCEPTION 'add_job returned no job' USING ERRCODE = '40001';
  END IF;
END;
$$;

-- Arms the alarm for the earliest open deadline (the alarm itself once it has run, and the
-- sweep, in case the alarm is missing or was pushed back by a failure), no later than a minute
-- from now; while openers hold the lock, no later than they allow and than the pending alarm
-- (an opener may be relying on the row this replaces). A deadline already past (a wait whose
-- run was busy) is looked at again after the busy delay. Returns the time set. In a
-- transaction of its own: the lock is held until it commits.
CREATE OR REPLACE FUNCTION "signalbox"."arm_deadline_alarm"()
RETURNS timestamptz LANGUAGE plpgsql AS $$
DECLARE
  v_quiet constant boolean := pg_try_advisory_xact_lock(signalbox.deadline_alarm_lock());
  v_busy constant interval := signalbox.deadline_alarm_busy_s() * interval '1 second';
  v_latest timestamptz;
  v_next timestamptz;
  v_run_at timestamptz;
BEGIN
  IF v_quiet THEN
    v_latest := now() + signalbox.deadline_alarm_idle_s() * interval '1 second';
  ELSE
    v_latest := coalesce(signalbox.deadline_alarm_holders_allow(), now() + v_busy);
    v_latest := least(v_latest, (SELECT min(j.run_at) FROM graphile_worker._private_jobs j WHERE j.key = 'expire_due' AND j.locked_at IS NULL));
  END IF;
  SELECT min(w.timeout_at) INTO v_next FROM signalbox.waits w WHERE w.status = 'waiting' AND w.timeout_at IS NOT NULL;
  v_run_at := least(v_next, v_latest);
  IF v_run_at <= now() THEN
    v_run_at := now() + v_busy;
  END IF;
  -- A pending alarm is replaced by a new row, not moved in place: a worker whose run of it was
  -- released as stale (it stalled; the sweep armed it again) completes it by id when it wakes,
  -- and must delete only the row it ran, not the alarm that replaced it.
  DELETE FROM graphile_worker._private_jobs j WHERE j.key = 'expire_due' AND j.locked_at IS NULL;
  PERFORM signalbox.add_job('expire_due', '{}'::json, v_run_at, signalbox.job_max_attempts(), 'expire_due', 'replace');
  RETURN v_run_at;
END;
$$;
