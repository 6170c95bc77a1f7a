"""The scheduler, in process, with the fake CLI: intervals measured from the
end of a run, no overlap, no pile-up, Run now, crash recovery, shutdown."""
from __future__ import annotations

import logging
import os
import sqlite3
import time
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.exc import DatabaseError, OperationalError

from app.extensions import db
from app.models import SchedulerState, Session
from app.sessions import control
from app.sessions import scheduler as scheduler_module
from app.sessions.scheduler import SessionScheduler, UnfinishedSession
from app.timeutil import utcnow
from tests import streamlines as sl
from tests.support.database import sqlite_only
from tests.support.waiting import wait_for


def all_sessions():
    db.session.remove()
    return db.session.scalars(select(Session).order_by(Session.id)).all()




def session_script(seconds: float) -> list[dict]:
    return sl.steps(sl.init(), sl.text("[EVENT:info:web] up")) + [{"sleep": seconds}] + sl.steps(sl.result())


@pytest.fixture
def scheduler(app):
    started = []

    def start(interval: int):
        app.config["CLAUDEOPS_INTERVAL"] = interval
        instance = SessionScheduler(app)
        instance.start()
        started.append(instance)
        return instance
    yield start
    for instance in started:
        instance.shutdown()


def assert_never_overlapping(sessions):
    finished = [s for s in sessions if s.started_at]
    for earlier, later in zip(finished, finished[1:]):
        assert earlier.ended_at is not None and later.started_at >= earlier.ended_at, \
            f"sessions {earlier.id} and {later.id} overlapped"


def test_interval_is_measured_from_the_end_of_the_previous_run(app, fake_cli, scheduler):
    fake_cli(session_script(1.5))
    instance = scheduler(interval=1)
    wait_for(lambda: len([s for s in all_sessions() if s.status == "completed"]) >= 2, timeout=20)
    instance.shutdown()
    sessions = [s for s in all_sessions() if s.status == "completed"]
    assert all(s.trigger == "schedule" and s.tier == 1 for s in sessions)
    assert_never_overlapping(sessions)
    gap = (sessions[1].started_at - sessions[0].ended_at).total_seconds()
    # Stored timestamps have whole seconds of precision in SQLite's default
    # rendering only at display; allow for scheduling jitter below the interval.
    assert gap >= 0.8, f"the next run started {gap:.2f}s after the last ended; interval is 1 s"


def add_scheduled_session(status: str, ago: float, ran_for: float = 1) -> Session:
    """A scheduled session of an earlier run of the service, queued ``ago`` seconds ago."""
    queued = utcnow() - timedelta(seconds=ago)
    ended = queued + timedelta(seconds=ran_for) if status != "running" else None
    session = Session(tier=1, trigger="schedule", status=status, created_at=queued, started_at=queued,
                      ended_at=ended)
    db.session.add(session)
    db.session.commit()
    return session


def assert_due_at(instance, expected):
    assert abs((instance.next_scheduled_run() - expected).total_seconds()) < 1, instance.next_scheduled_run()


def test_a_restart_within_the_interval_waits_for_the_rest_of_it(app, fake_cli, scheduler):
    fake_cli(session_script(0))
    last = add_scheduled_session("completed", ago=600, ran_for=60)
    instance = scheduler(interval=3600)
    assert_due_at(instance, last.ended_at + timedelta(seconds=3600))
    time.sleep(1.5)
    assert [s.id for s in all_sessions()] == [last.id]


def test_a_service_down_longer_than_the_interval_runs_at_once(app, fake_cli, scheduler):
    fake_cli(session_script(0))
    add_scheduled_session("failed", ago=7300, ran_for=60)
    scheduler(interval=3600)
    wait_for(lambda: [s for s in all_sessions() if s.id == 2 and s.finished], timeout=10)


def test_a_scheduled_session_the_service_stopped_under_counts_from_when_it_was_queued(app, fake_cli, scheduler):
    """It is marked interrupted at the restart, which is no end of its own."""
    fake_cli(session_script(0))
    crashed = add_scheduled_session("running", ago=600)
    instance = scheduler(interval=3600)
    assert_due_at(instance, crashed.created_at + timedelta(seconds=3600))


def test_a_session_recorded_by_a_clock_that_was_ahead_counts_from_now(app, fake_cli, scheduler, caplog):
    """Else the schedule would wait, silent, until the clock caught up."""
    fake_cli(session_script(0))
    add_scheduled_session("completed", ago=-86400)   # a day ahead
    instance = scheduler(interval=3600)
    assert_due_at(instance, utcnow() + timedelta(seconds=3600))
    assert "the interval counts from now" in caplog.text


def test_a_clock_set_back_while_the_scheduler_runs_moves_every_job_back_with_it(app, fake_cli, scheduler,
                                                                                  monkeypatch, caplog):
    """Else each would wait as much longer: the next session, and the
    heartbeat the dashboard tells a running scheduler by. The wall clock the
    scheduler looks at is set back an hour here (the machine's cannot be),
    so that its jobs, kept in the machine's time, are due an hour sooner."""
    from app.sessions.clock_watch import ClockWatch
    set_back = [0.0]
    monkeypatch.setattr(scheduler_module, "ClockWatch",
                        lambda moved: ClockWatch(moved, wall=lambda: time.time() - set_back[0]))
    fake_cli(session_script(0))
    last = add_scheduled_session("completed", ago=3000, ran_for=60)
    instance = scheduler(interval=3600)
    due = last.ended_at + timedelta(seconds=3600)   # 11 minutes from now
    assert_due_at(instance, due)
    retention = instance._aps.get_job(scheduler_module.RETENTION_JOB_ID).next_run_time
    time.sleep(1.5)   # the start's own heartbeat is over
    set_back_at = utcnow()
    set_back[0] = 3000.0
    # A beat at once (not 15 s on), for the dashboard to show the schedule as moved.
    wait_for(lambda: db.session.get(SchedulerState, 1, populate_existing=True).heartbeat_at >= set_back_at,
             timeout=5)
    # Due 39 minutes ago in the machine's time: the scheduled session runs at once.
    wait_for(lambda: [s for s in all_sessions() if s.id != last.id and s.finished], timeout=10)
    assert "the clock was set back 0:50:00:" in caplog.text
    later = instance._aps.get_job(scheduler_module.RETENTION_JOB_ID).next_run_time
    assert abs((retention - later).total_seconds() - 3000) < 2


def test_the_next_scheduled_session_is_queued_on_time_while_other_sessions_keep_the_queue_busy(
        app, fake_cli, scheduler):
    """Armed after every session the worker runs, not only once the queue is
    empty: the schedule does not slip behind Run now and API sessions."""
    fake_cli(session_script(1.5))
    scheduler(interval=2)
    wait_for(lambda: [s for s in all_sessions() if s.status == "running"], timeout=15)
    for _ in range(3):
        control.enqueue(tier=1, trigger="api")
    wait_for(lambda: len([s for s in all_sessions() if s.trigger == "schedule"]) >= 2, timeout=30)
    first, second = [s for s in all_sessions() if s.trigger == "schedule"][:2]
    api_ended = [s.ended_at for s in all_sessions() if s.trigger == "api" and s.ended_at]
    waited = (second.created_at - first.ended_at).total_seconds()
    assert 1.5 <= waited < 3.5, f"queued {waited:.1f} s after the last scheduled session ended; the interval is 2 s"
    assert len(api_ended) < 3   # before the other sessions were all done


def test_a_run_longer_than_the_interval_does_not_pile_up(app, fake_cli, scheduler):
    fake_cli(session_script(3))
    scheduler(interval=1)
    time.sleep(2.5)  # well past the interval while the first run is still going
    sessions = all_sessions()
    assert len(sessions) == 1 and sessions[0].status == "running"


def test_interval_zero_runs_only_ad_hoc_sessions(app, fake_cli, scheduler):
    fake_cli(session_script(0))
    scheduler(interval=0)
    time.sleep(1.5)
    assert all_sessions() == []
    queued_id = control.enqueue(trigger="dashboard").id
    done = wait_for(lambda: [s for s in all_sessions() if s.id == queued_id and s.finished], timeout=10)
    assert done[0].status == "completed"


def test_run_now_starts_within_a_few_seconds_and_sessions_run_one_at_a_time(app, fake_cli, scheduler):
    fake_cli(session_script(0.5))
    scheduler(interval=0)
    requested = time.monotonic()
    ids = [control.enqueue(trigger="api").id for _ in range(3)]
    wait_for(lambda: any(s.status != "queued" for s in all_sessions()), timeout=5)
    assert time.monotonic() - requested < 3
    wait_for(lambda: all(s.finished for s in all_sessions()), timeout=20)
    sessions = all_sessions()
    assert [s.id for s in sessions] == ids and all(s.status == "completed" for s in sessions)
    assert_never_overlapping(sessions)


def test_a_session_left_running_by_a_crash_is_marked_interrupted(app, fake_cli, scheduler):
    fake_cli(session_script(0))
    orphan = Session(tier=1, trigger="schedule", status="running", created_at=utcnow(), started_at=utcnow())
    db.session.add(orphan)
    db.session.commit()
    scheduler(interval=0)
    reloaded = db.session.get(Session, orphan.id, populate_existing=True)
    assert reloaded.status == "interrupted"
    assert "service stopped while this session was running" in reloaded.status_reason
    assert reloaded.ended_at is not None


def test_a_session_left_running_ends_when_it_was_last_seen_not_at_the_restart(app):
    from app.models import SessionActivity
    now = utcnow()
    started = now - timedelta(hours=8)
    quiet, busy, never = (Session(tier=1, trigger="schedule", status="running", created_at=started,
                                  started_at=started) for _ in range(3))
    db.session.add_all([quiet, busy, never])
    db.session.flush()
    db.session.add(SessionActivity(session_id=busy.id, kind="text", title="t", body="b",
                                   created_at=now - timedelta(hours=7)))
    db.session.add(SessionActivity(session_id=quiet.id, kind="text", title="t", body="b",
                                   created_at=now - timedelta(hours=7, minutes=50)))
    # The dead scheduler's last beat: after the quiet session's last activity, before the busy one's.
    db.session.merge(SchedulerState(id=1, heartbeat_at=now - timedelta(hours=7, minutes=30)))
    db.session.commit()
    ids = quiet.id, busy.id, never.id
    assert control.mark_interrupted() == 3
    ended = {s.id: s.ended_at.replace(tzinfo=now.tzinfo) for s in all_sessions()}
    assert ended[ids[0]] == now - timedelta(hours=7, minutes=30)   # the heartbeat, later than its activity
    assert ended[ids[1]] == now - timedelta(hours=7)               # its activity, later than the heartbeat
    assert ended[ids[2]] == now - timedelta(hours=7, minutes=30)
    # A heartbeat from before a session started is not its runner's: it ends as it was last seen.
    late = Session(tier=1, trigger="cli", status="running", created_at=now, started_at=now - timedelta(minutes=5))
    db.session.add(late)
    db.session.commit()
    control.mark_interrupted()
    db.session.refresh(late)
    assert late.status == "interrupted" and late.ended_at.replace(tzinfo=now.tzinfo) == now - timedelta(minutes=5)


def test_what_a_killed_claudeops_run_queued_ends_unrun_and_the_rest_runs(app, fake_cli, scheduler):
    """A `claudeops run` runs its own chain: what it queued for itself waits
    for nobody once it is gone. The rest of the queue is the scheduler's."""
    from app.sessions.recovery import ABANDONED_REASON
    from plugins.events.models import Event
    fake_cli(session_script(0))

    def ended(trigger: str, parent_id=None) -> int:
        session = Session(tier=1 if parent_id is None else 2, trigger=trigger, status="completed",
                          created_at=utcnow(), started_at=utcnow(), ended_at=utcnow(), parent_id=parent_id)
        db.session.add(session)
        db.session.commit()
        return session.id
    cli_parent, api_parent = ended("cli"), ended("api")
    cli_child = control.enqueue(tier=2, trigger="escalation", parent_id=cli_parent, escalation_reason="disk").id
    cli_unclaimed = control.enqueue(tier=1, trigger="cli").id   # killed between queueing and claiming it
    api_child = control.enqueue(tier=2, trigger="escalation", parent_id=api_parent, escalation_reason="disk").id
    asked = control.enqueue(tier=1, trigger="dashboard").id
    scheduler(interval=0)
    wait_for(lambda: all(s.finished for s in all_sessions()), timeout=15)
    found = {s.id: s for s in all_sessions()}
    assert (found[api_child].status, found[asked].status) == ("completed", "completed")
    assert found[api_child].started_at < found[asked].started_at   # its chain first, as before
    for orphan in (cli_child, cli_unclaimed):
        assert (found[orphan].status, found[orphan].status_reason, found[orphan].started_at) == (
            "interrupted", ABANDONED_REASON, None)
    assert [e.message for e in db.session.scalars(select(Event).where(Event.level == "warning")
                                                  .order_by(Event.id))] == [
        f"Escalation session #{cli_child} (tier 2) was {ABANDONED_REASON}",
        f"Session #{cli_unclaimed} (tier 1) was {ABANDONED_REASON}"]


def test_shutdown_ends_the_running_session_as_stopped(app, fake_cli, scheduler):
    fake_cli(session_script(60))
    instance = scheduler(interval=0)
    session_id = control.enqueue().id
    wait_for(lambda: any(s.status == "running" for s in all_sessions()), timeout=5)
    time.sleep(0.5)
    started = time.monotonic()
    instance.shutdown()
    assert time.monotonic() - started < 15
    session = db.session.get(Session, session_id, populate_existing=True)
    assert session.status == "stopped" and "service shut down" in session.status_reason


def test_a_lost_runner_lock_stops_the_running_session_saying_so_not_that_the_service_shut_down(
        app, fake_cli, scheduler, monkeypatch, caplog):
    """Only PostgreSQL's lock can be lost (tests/test_runner_lock.py): lost
    here by its check's answer. The session is stopped as a shutdown stops
    it, but no one stopped the service, and another process may be running
    sessions now: the operator is told which."""
    caplog.set_level(logging.INFO, logger="app.sessions.manager")
    fake_cli(session_script(60))
    instance = scheduler(interval=0)
    session_id = control.enqueue().id
    wait_for(lambda: any(s.status == "running" for s in all_sessions()), timeout=5)
    monkeypatch.setattr(instance._lock, "verify", lambda: False)   # the keeper looks again within a second
    wait_for(lambda: instance._stopped.is_set(), timeout=20)
    session = db.session.get(Session, session_id, populate_existing=True)
    assert (session.status, session.status_reason) == (
        "stopped", "the scheduler lost the database's runner lock (another Claude Ops process took it, or the "
                   "database could not be reached again within 60 s); the service exits, for its init system to "
                   "start it again")
    [said] = [r.getMessage() for r in caplog.records if "runner lock" in r.getMessage()
              and r.name == "app.sessions.scheduler"]
    assert said.startswith("this scheduler no longer holds the database's runner lock (another Claude Ops process "
                           "took it, or the database could not be reached again within 60 s); it stops running "
                           "sessions, the running one ends as stopped")
    assert f"session {session_id} stopped: {session.status_reason}" in caplog.text
    assert "shut down" not in caplog.text


def test_a_scheduled_run_stopped_while_queued_does_not_stop_the_schedule(app, fake_cli, scheduler):
    fake_cli(session_script(2))
    control.enqueue(trigger="api")   # keeps the worker busy, so the scheduled run waits in the queue
    scheduler(interval=1)
    scheduled = wait_for(lambda: [s for s in all_sessions() if s.trigger == "schedule"], timeout=5)[0]
    assert scheduled.status == "queued"
    control.request_stop(scheduled.id)
    # The schedule is re-armed: another scheduled run is queued after the interval.
    later = wait_for(lambda: [s for s in all_sessions() if s.trigger == "schedule" and s.id != scheduled.id],
                     timeout=20)
    assert later[0].tier == 1


def test_an_escalation_queued_above_a_lowered_maximum_tier_is_not_run(app, fake_cli, scheduler, run_session_now):
    """Lowering CLAUDEOPS_MAX_TIER (1 turns escalation off) holds for an
    escalation already queued; a tier the operator asked for still runs."""
    from app.runtime import change
    from plugins.events.models import Event
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] postgres is down"), sl.result()))
    parent = run_session_now(tier=1).id
    child = db.session.scalar(select(Session).where(Session.parent_id == parent))
    assert (child.tier, child.status) == (2, "queued")
    child = child.id
    change({"CLAUDEOPS_MAX_TIER": 1})            # as /config would
    fake_cli(session_script(0))
    asked = control.enqueue(tier=3, trigger="dashboard").id
    scheduler(interval=0)
    wait_for(lambda: all(s.finished for s in all_sessions()), timeout=15)
    sessions = {s.id: s for s in all_sessions()}
    assert sessions[asked].status == "completed"
    stopped = sessions[child]
    assert (stopped.status, stopped.started_at) == ("stopped", None)
    assert stopped.status_reason == "not run: CLAUDEOPS_MAX_TIER is 1 since it was queued"
    assert [e.message for e in db.session.scalars(select(Event).where(Event.level == "warning"))][-1] == (
        f"Escalation session #{child} (tier 2) was not run: CLAUDEOPS_MAX_TIER is 1 since it was queued")

def test_a_second_scheduler_on_the_same_state_refuses_to_start(app, scheduler):
    from app.sessions.scheduler import SchedulerAlreadyRunning
    scheduler(interval=0)
    with pytest.raises(SchedulerAlreadyRunning, match=rf"another Claude Ops process \(pid {os.getpid()}\) is running sessions"):
        SessionScheduler(app).start()


def test_an_interval_changed_at_run_time_takes_effect(app, fake_cli, scheduler):
    from app.runtime import change
    fake_cli(session_script(0))
    instance = scheduler(interval=0)
    time.sleep(1.5)
    assert all_sessions() == [] and instance.next_scheduled_run() is None
    change({"CLAUDEOPS_INTERVAL": 1})             # as /config would
    wait_for(lambda: len([s for s in all_sessions() if s.trigger == "schedule" and s.finished]) >= 2, timeout=15)
    change({"CLAUDEOPS_INTERVAL": 0})
    time.sleep(2.5)                               # let a run in flight finish
    count = len(all_sessions())
    time.sleep(2.5)
    assert len(all_sessions()) == count and instance.next_scheduled_run() is None


def started_during_an_api_session(scheduler, interval: int):
    """A scheduler at ``interval``, once it is running an API session (the
    fake CLI's script for it set by the caller)."""
    control.enqueue(tier=1, trigger="api")
    instance = scheduler(interval=interval)
    wait_for(lambda: [s for s in all_sessions() if s.trigger == "api" and s.status == "running"], timeout=5)
    return instance


def test_an_interval_turned_off_while_another_session_runs_queues_no_scheduled_session(app, fake_cli, scheduler):
    """The worker, which arms the schedule, is busy with that session: the
    run armed before must not fire at its old time all the same."""
    from app.runtime import change
    fake_cli(session_script(5))
    add_scheduled_session("completed", ago=1, ran_for=0)
    instance = started_during_an_api_session(scheduler, interval=3)
    change({"CLAUDEOPS_INTERVAL": 0})
    wait_for(lambda: instance.next_scheduled_run() is None, timeout=3)
    time.sleep(2.5)   # past the time the run was armed for, the api session still running
    assert [s.trigger for s in all_sessions()] == ["schedule", "api"]
    assert db.session.get(SchedulerState, 1, populate_existing=True).next_run_at is None


def test_an_interval_lengthened_while_another_session_runs_moves_the_next_run(app, fake_cli, scheduler):
    from app.runtime import change
    fake_cli(session_script(5))
    due = add_scheduled_session("completed", ago=1, ran_for=0).ended_at + timedelta(seconds=3600)
    instance = started_during_an_api_session(scheduler, interval=3)
    change({"CLAUDEOPS_INTERVAL": 3600})
    wait_for(lambda: abs((instance.next_scheduled_run() - due).total_seconds()) < 1, timeout=3)
    time.sleep(2.5)
    assert [s.trigger for s in all_sessions()] == ["schedule", "api"]
    published = db.session.get(SchedulerState, 1, populate_existing=True).next_run_at
    assert abs((published - due).total_seconds()) < 1


def test_an_interval_turned_on_while_another_session_runs_arms_the_schedule_at_once(app, client, fake_cli,
                                                                                     scheduler):
    """Not only once that session has ended: until then the Overview would
    tell of a scheduled session under way, and none would be queued when due."""
    from app.runtime import change
    fake_cli(session_script(5))
    due = add_scheduled_session("completed", ago=600, ran_for=0).ended_at + timedelta(seconds=3600)
    instance = started_during_an_api_session(scheduler, interval=0)
    change({"CLAUDEOPS_INTERVAL": 3600})
    wait_for(lambda: instance.next_scheduled_run() is not None, timeout=3)
    assert_due_at(instance, due)
    html = client.get("/").get_data(as_text=True)
    assert "Next scheduled run" in html and "a scheduled session is under way" not in html


def test_the_schedule_is_not_armed_twice_while_its_job_is_firing(app, caplog):
    """APScheduler takes a fired date job out of its store before its thread
    runs it. The worker, looking meanwhile, must not arm a second job: that
    one would be due at once and skipped, with a warning in the log
    ("maximum number of running instances reached")."""
    from app.sessions.scheduler import SCHEDULED_JOB_ID
    app.config["CLAUDEOPS_INTERVAL"] = 1
    instance = SessionScheduler(app)
    instance._aps.start(paused=True)   # nothing fires unless the test says so
    try:
        instance._ensure_armed()
        assert instance.next_scheduled_run() is not None
        instance._aps.remove_job(SCHEDULED_JOB_ID)   # fired: handed to a thread, not run yet
        with caplog.at_level(logging.WARNING):
            instance._ensure_armed()                 # the worker's next look
            assert instance.next_scheduled_run() is None
            instance._enqueue_scheduled()            # the fired job's run
        assert [(s.trigger, s.status) for s in all_sessions()] == [("schedule", "queued")]
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        db.session.execute(update(Session).values(status="completed", ended_at=utcnow()))
        db.session.commit()
        instance._ensure_armed()                     # that session ended: the next one is armed
        assert instance.next_scheduled_run() is not None
    finally:
        instance._aps.shutdown(wait=False)


def test_a_session_whose_run_raised_is_recorded_failed_with_its_reason_redacted(app, monkeypatch, caplog):

    def broken(session, shutdown_event):
        raise RuntimeError("could not connect to postgres://claudeops:s3cr3t-pw@db/claudeops")
    monkeypatch.setattr(scheduler_module, "run_session", broken)
    session_id = control.enqueue().id
    instance = SessionScheduler(app)
    with pytest.raises(RuntimeError):
        instance._run_next()
    broke_off = utcnow()
    time.sleep(1.1)   # the database takes the record only later (a full disk, freed)
    instance._record_unfinished()
    session = db.session.get(Session, session_id)
    db.session.refresh(session)
    assert session.status == "failed"
    # When it broke off, not when the record could be written.
    assert broke_off - timedelta(seconds=1) < session.ended_at.replace(tzinfo=broke_off.tzinfo) <= broke_off
    assert session.status_reason == ("the session could not be finished: RuntimeError: could not connect to "
                                     "postgres://claudeops:[redacted]@db/claudeops")
    assert "s3cr3t-pw" not in caplog.text and f"session {session_id} recorded as failed" in caplog.text


def test_a_scheduled_session_whose_run_raised_counts_the_interval_from_its_end(app, monkeypatch):
    """As one that ended by itself, and as a restart would count it from the
    end recorded: not from when it was queued, which after a session longer
    than the interval would queue the next one at once."""
    from app.sessions.scheduler import SCHEDULED_JOB_ID
    app.config["CLAUDEOPS_INTERVAL"] = 3

    def broken(session, shutdown_event):
        time.sleep(4)
        raise RuntimeError("the database refused the end")
    monkeypatch.setattr(scheduler_module, "run_session", broken)
    instance = SessionScheduler(app)
    instance._aps.start(paused=True)   # the test fires the job itself
    try:
        instance._ensure_armed()
        instance._aps.remove_job(SCHEDULED_JOB_ID)   # fired
        instance._enqueue_scheduled()
        with pytest.raises(RuntimeError):
            instance._run_next()
        broke_off = utcnow()
        instance._record_unfinished()
        instance._ensure_armed()
        assert_due_at(instance, broke_off + timedelta(seconds=3))
    finally:
        instance._aps.shutdown(wait=False)


def test_a_session_whose_end_could_not_be_recorded_keeps_the_reason_it_ended_with(app, fake_cli, monkeypatch):
    """The database refuses the session's end (its disk full, freed later):
    the scheduler records it failed with the reason it ended with, not only
    with why that could not be recorded."""
    from app import dbfaults
    from app.sessions import manager
    fake_cli(sl.steps(sl.init(), sl.text("Looking.")))   # no result line
    really_waiting_out = dbfaults.waiting_out
    disk_full = OperationalError("UPDATE sessions", {}, sqlite3.OperationalError("database or disk is full"))

    def full_at_the_end(work, what, shutdown=None):
        if what.endswith("recording its end"):
            raise disk_full
        return really_waiting_out(work, what, shutdown)
    monkeypatch.setattr(manager.dbfaults, "waiting_out", full_at_the_end)
    session_id = control.enqueue().id
    instance = SessionScheduler(app)
    with pytest.raises(OperationalError):
        instance._run_next()
    instance._record_unfinished()
    session = db.session.get(Session, session_id)
    db.session.refresh(session)
    assert session.status == "failed"
    assert session.status_reason.startswith("the Claude CLI ended without a result line")
    assert session.status_reason.endswith(f"(its end could not be recorded then: {dbfaults.describe(disk_full)})")
    assert "disk" in dbfaults.describe(disk_full)
    # One that completed is recorded completed, saying its end came late.
    fake_cli(sl.steps(sl.init(), sl.text("Looking."), sl.result()))
    session_id = control.enqueue().id
    with pytest.raises(OperationalError):
        instance._run_next()
    instance._record_unfinished()
    session = db.session.get(Session, session_id)
    db.session.refresh(session)
    assert (session.status, session.status_reason) == (
        "completed", f"its end could not be recorded then: {dbfaults.describe(disk_full)}")


@sqlite_only("a database file named outside the state directory")
def test_two_state_directories_sharing_one_sqlite_file_run_sessions_in_one_process_only(tmp_path):
    from app.sessions.runner_lock import RunnerLock, SchedulerAlreadyRunning
    url = f"sqlite:///{tmp_path / 'shared' / 'claudeops.db'}"
    (tmp_path / "shared").mkdir()
    first = RunnerLock(str(tmp_path / "a"), url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first.acquire()
    try:
        with pytest.raises(SchedulerAlreadyRunning, match=f"running sessions on the database {tmp_path}/shared/claudeops.db"):
            RunnerLock(str(tmp_path / "b"), url).acquire()
        RunnerLock(str(tmp_path / "b")).acquire()   # its own directory's lock was given back
    finally:
        first.release()
    second = RunnerLock(str(tmp_path / "b"), url)
    second.acquire()   # free once the first let go
    second.release()


def test_while_a_scheduled_session_runs_the_overview_still_tells_a_schedule(app, client, fake_cli, scheduler):
    """The schedule's job is re-armed only when its session ends: meanwhile
    there is no next run to publish, but the interval is not 0."""
    fake_cli(session_script(4))
    instance = scheduler(interval=3600)
    wait_for(lambda: [s for s in all_sessions() if s.trigger == "schedule" and s.status == "running"], timeout=10)
    instance._heartbeat()   # as the heartbeat job does every 15 s
    html = client.get("/").get_data(as_text=True)
    assert "CLAUDEOPS_INTERVAL is 0" not in html
    assert "a scheduled session is under way" in html


def test_once_the_schedule_has_fired_its_time_is_no_longer_published_as_the_next_run(app, client):
    """Not the time just past, on /api/v1/stats and the Overview, until the
    next heartbeat (up to 15 s): while its session runs there is none."""
    app.config["CLAUDEOPS_INTERVAL"] = 3600
    db.session.add(SchedulerState(id=1))
    db.session.commit()
    instance = SessionScheduler(app)
    instance._aps.start(paused=True)   # the test fires the job itself, and no heartbeat runs
    try:
        instance._ensure_armed()
        assert client.get("/api/v1/stats").get_json()["next_scheduled_run"] is not None
        instance._enqueue_scheduled()   # the job fires
        assert client.get("/api/v1/stats").get_json()["next_scheduled_run"] is None
        assert "a scheduled session is under way" in client.get("/").get_data(as_text=True)
    finally:
        instance._aps.shutdown(wait=False)


def test_a_shutdown_the_database_refuses_still_gives_the_lock_back_and_says_what_is_left(app, monkeypatch, caplog):
    """Another writer holds SQLite's lock past the busy timeout: the
    shutdown logs what it could not record, and ends."""
    instance = SessionScheduler(app)
    instance.start()
    locked = OperationalError("UPDATE", {}, sqlite3.OperationalError("database is locked"))
    instance._unfinished[7] = UnfinishedSession("the session could not be finished: the database is locked", utcnow(),
                                                "failed", None)
    monkeypatch.setattr(control, "end_running", lambda *args: (_ for _ in ()).throw(locked))
    monkeypatch.setattr(instance, "_publish", lambda next_run, alive=True: (_ for _ in ()).throw(locked))
    with caplog.at_level(logging.WARNING):
        instance.shutdown()
    assert instance._stopped.is_set()
    again = SessionScheduler(app)
    again.start()   # the lock was given back
    again.shutdown()
    assert "session 7 is left recorded as running (the session could not be finished" in caplog.text
    assert "the next start marks it interrupted" in caplog.text
    assert "could not record that the scheduler stopped (the database is locked" in caplog.text


def test_a_heartbeat_that_waits_out_a_locked_database_is_one_line_not_two(app, monkeypatch, caplog):
    """SQLite's busy timeout is as long as a beat's period: a beat still
    waiting when the next is due must not cost APScheduler's own warning
    that it skipped that one, beside the service's line for each beat."""
    monkeypatch.setattr(scheduler_module, "HEARTBEAT_SECONDS", 0.5)

    def locked_after_waiting(next_run, alive=True):
        time.sleep(0.8)   # longer than a beat, as the busy timeout is
        raise OperationalError("UPDATE scheduler_state", {}, sqlite3.OperationalError("database is locked"))
    app.config["CLAUDEOPS_INTERVAL"] = 0   # nothing published but by the heartbeat
    instance = SessionScheduler(app)
    monkeypatch.setattr(instance, "_publish", locked_after_waiting)
    with caplog.at_level(logging.WARNING):
        instance.start()
        try:
            wait_for(lambda: caplog.text.count("scheduler heartbeat not recorded") >= 4, timeout=15)
        finally:
            instance.shutdown()
    assert [r.getMessage() for r in caplog.records if r.name.startswith("apscheduler")] == []


def test_a_heartbeat_the_database_refuses_is_one_line_in_the_log_and_the_next_tries_again(app, monkeypatch, caplog):
    instance = SessionScheduler(app)
    monkeypatch.setattr(instance, "verify_lock", lambda: True)

    def locked(next_run, alive=True):
        raise OperationalError("UPDATE scheduler_state", {}, sqlite3.OperationalError("database is locked"))
    monkeypatch.setattr(instance, "_publish", locked)
    with caplog.at_level(logging.WARNING):
        instance._heartbeat()
    [record] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert record.getMessage().startswith("scheduler heartbeat not recorded: the database is locked")
    assert record.getMessage().endswith("the next one tries again in 15 s")

    def broken(next_run, alive=True):   # a mistake, not the database refusing: as loud as before
        raise OperationalError("UPDATE scheduler_state", {}, sqlite3.OperationalError("no such column: pid"))
    monkeypatch.setattr(instance, "_publish", broken)
    with pytest.raises(OperationalError):
        instance._heartbeat()


def test_a_database_that_refuses_the_worker_is_one_line_in_the_log_not_a_traceback(app, monkeypatch, caplog):
    """A database server restarted or down: the worker retries every second,
    saying why in one line, not a traceback (and no more lines a second:
    test_a_worker_failing_through_an_outage_logs_once_a_minute_…)."""
    instance = SessionScheduler(app)
    attempts = []

    def unavailable():
        attempts.append(1)
        if len(attempts) == 2:
            instance.shutdown_event.set()
        # libpq's words, with its hint on a line of its own
        raise OperationalError("SELECT sessions", {}, ConnectionError(
            "connection failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP "
            "connections?"))
    monkeypatch.setattr(instance, "_run_next", unavailable)
    monkeypatch.setattr(instance._wake, "wait", lambda timeout: None)
    with caplog.at_level(logging.WARNING):
        instance._work()
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(attempts) == 2 and len(records) == 1 and not any(r.exc_info for r in records)
    assert records[0].getMessage() == ("scheduler worker failed (the database is unavailable (connection failed: "
                                       "Connection refused Is the server running on that host and accepting "
                                       "TCP/IP connections?)); retrying")


def test_a_mistake_in_the_worker_keeps_its_traceback(app, monkeypatch, caplog):
    instance = SessionScheduler(app)

    def broken():
        instance.shutdown_event.set()
        raise KeyError("not the database")
    monkeypatch.setattr(instance, "_run_next", broken)
    with caplog.at_level(logging.ERROR):
        instance._work()
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert record.exc_info is not None


def test_a_mistake_following_the_interval_over_and_over_is_logged_once_a_minute(app, monkeypatch, caplog):
    """The interval is looked at every second: a failure that every look meets
    (a damaged database file, a table its user may no longer read) must not
    write a traceback a second, as the worker's own retries do not."""
    clock = [1000.0]
    monkeypatch.setattr(scheduler_module.time, "monotonic", lambda: clock[0])
    instance = SessionScheduler(app)
    looks = []

    def look(timeout):
        looks.append(1)
        clock[0] += 1
        return len(looks) > 120   # two minutes of looks
    monkeypatch.setattr(instance.shutdown_event, "wait", look)

    def damaged():
        raise DatabaseError("SELECT sessions", {}, sqlite3.DatabaseError("database disk image is malformed"))
    monkeypatch.setattr(instance, "_ensure_armed", damaged)
    with caplog.at_level(logging.WARNING, logger=scheduler_module.__name__):
        instance._follow_interval()
    records = caplog.records
    assert len(records) == 2, len(records)   # not 120
    assert all(r.exc_info is not None for r in records)


def test_a_claimed_session_the_database_refuses_to_read_back_does_not_stay_running(app, monkeypatch):
    """The claim is committed, then the row read back: a database server
    that goes away between the two must not leave the session "running"
    with nothing running it, nor hold back the schedule for ever."""
    app.config["CLAUDEOPS_INTERVAL"] = 3600
    session_id = control.enqueue(trigger="schedule").id
    instance = SessionScheduler(app)
    real_get = db.session.get
    failures = []

    def gone_once(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise OperationalError("SELECT sessions", {}, ConnectionError("server closed the connection unexpectedly"))
        return real_get(*args, **kwargs)
    monkeypatch.setattr(scheduler_module.db.session, "get", gone_once, raising=False)
    with pytest.raises(OperationalError):
        instance._run_next()
    monkeypatch.undo()
    instance._record_unfinished()
    session = all_sessions()[0]
    assert session.id == session_id and session.status == "failed"
    assert "server closed the connection unexpectedly" in session.status_reason
    assert not control.has_pending("schedule")   # the schedule is armed again


def test_a_worker_failing_through_an_outage_logs_once_a_minute_then_says_it_recovered(app, monkeypatch, caplog):
    """A retry a second must not write a line a second to a disk that is full."""
    clock = [1000.0]
    monkeypatch.setattr(scheduler_module.time, "monotonic", lambda: clock[0])
    instance = SessionScheduler(app)
    refused = OperationalError("INSERT", {}, sqlite3.OperationalError("database or disk is full"))
    with caplog.at_level(logging.WARNING, logger=scheduler_module.__name__):
        for _ in range(120):   # two minutes of retries
            instance._failed(refused)
            clock[0] += 1
        instance._recovered()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines   # not 121
    assert lines[0].startswith("scheduler worker failed (") and "full" in lines[0]
    assert lines[1].startswith("scheduler worker still failing (") and lines[1].endswith(": 61 times in 60 s; retrying")
    assert lines[2] == "scheduler worker works again, after failing 120 times in 120 s"


def test_a_scheduled_run_the_database_refused_to_queue_is_armed_again_at_once(app, monkeypatch):
    """A database locked as the schedule fires costs that moment, not the
    whole interval: the run is tried again, not put off until the next."""
    app.config["CLAUDEOPS_INTERVAL"] = 3600
    db.session.add(SchedulerState(id=1))
    db.session.commit()
    instance = SessionScheduler(app)
    instance._aps.start(paused=True)   # the test fires the job itself
    try:
        instance._ensure_armed()
        assert instance.next_scheduled_run() <= utcnow() + timedelta(seconds=5)

        def locked(**kwargs):
            raise OperationalError("INSERT INTO sessions", {}, sqlite3.OperationalError("database is locked"))
        monkeypatch.setattr(control, "enqueue", locked)
        instance._aps.remove_job("scheduled-tier1")   # as APScheduler does before firing a date job
        instance._enqueue_scheduled()
        monkeypatch.undo()
        assert not instance._wake.is_set()   # retried at the worker's next poll, not in a busy loop
        assert not control.has_pending("schedule")
        instance._ensure_armed()
        assert instance.next_scheduled_run() <= utcnow() + timedelta(seconds=5)
    finally:
        instance._aps.shutdown(wait=False)


def test_a_scheduled_run_queued_whose_schedule_cannot_be_published_is_not_said_to_be_unqueued(app, monkeypatch,
                                                                                           caplog):
    """The session is queued; only the Overview's next run waits for the
    heartbeat. The log must not send the operator looking for a run that
    was not queued, nor the worker wait a poll to start it."""
    app.config["CLAUDEOPS_INTERVAL"] = 3600
    db.session.add(SchedulerState(id=1))
    db.session.commit()
    instance = SessionScheduler(app)

    def locked(**kwargs):
        raise OperationalError("UPDATE scheduler_state", {}, sqlite3.OperationalError("database is locked"))
    monkeypatch.setattr(instance, "_publish", locked)
    with caplog.at_level(logging.WARNING, logger="app.sessions.scheduler"):
        instance._enqueue_scheduled()
    assert control.has_pending("schedule") and instance._wake.is_set()
    assert "not queued" not in caplog.text
    assert "scheduled session queued, but the schedule not published: the database is locked" in caplog.text
