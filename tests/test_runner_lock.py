"""One scheduler per database: hosts that share a PostgreSQL database share
no state directory, so the database's advisory lock is what keeps a second
scheduler (or `claudeops run`) from running sessions beside the first."""
from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import threading
import time

import pytest
from sqlalchemy import create_engine, select, text

from app.extensions import db
from app.models import SchedulerState, Session
from app.sessions import control
from app.sessions.runner_lock import RunnerLock, SchedulerAlreadyRunning
from app.sessions.scheduler import SessionScheduler
from tests import streamlines as sl
from tests.conftest import FAKE_CLAUDE, make_app
from tests.support.database import postgres_only, restart_server, restarts_the_server, server_answers
from tests.support.service import CLAUDEOPS, Service

pytestmark = postgres_only("advisory locks; a SQLite database is locked by a file beside it (tests/test_scheduler.py)")

HOLDER = f"claudeops runner on {socket.gethostname()}, pid {os.getpid()}"[:63]


@pytest.fixture
def two_hosts(tmp_path):
    """Two apps with state directories of their own and one database, as two hosts would have."""
    first = make_app(tmp_path / "host-a")
    second = make_app(tmp_path / "host-b", CLAUDEOPS_DATABASE_URL=first.config["CLAUDEOPS_DATABASE_URL"])
    started: list[SessionScheduler] = []

    def start(app) -> SessionScheduler:
        app.config["CLAUDEOPS_INTERVAL"] = 0
        scheduler = SessionScheduler(app)
        scheduler.start()
        started.append(scheduler)
        return scheduler
    yield first, second, start
    for scheduler in started:
        scheduler.shutdown()


def wait_for(predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def session_status(app, session_id: int) -> str:
    with app.app_context():
        db.session.remove()
        return db.session.scalar(select(Session.status).where(Session.id == session_id))


def end_lock_connection(url: str) -> int:
    """What a network failure does to the holder: its connection ends, and with it the lock."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            return len(connection.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name LIKE 'claudeops runner%'")).all())
    finally:
        engine.dispose()


def take_the_lock_from_its_holder(url: str, usurper: RunnerLock) -> None:
    """End the holder's connection and take its lock before the holder takes
    it again (it checks every second): tried until it is taken first."""
    for _ in range(20):
        end_lock_connection(url)
        try:
            usurper.acquire()
            return
        except SchedulerAlreadyRunning:
            continue
    raise AssertionError("the holder took its lock again first, twenty times")


@pytest.fixture
def checked_by_hand(monkeypatch):
    """The scheduler's lock checked only when a test calls verify_lock: its
    own thread, every second, would race the test for a lost lock."""
    from app.sessions import scheduler as scheduler_module
    monkeypatch.setattr(scheduler_module, "LOCK_CHECK_SECONDS", 3600)


def test_a_second_scheduler_on_another_state_directory_refuses(two_hosts, fake_cli):
    first, second, start = two_hosts
    fake_cli(sl.steps(sl.init(), sl.result("ok")))
    start(first)
    with pytest.raises(SchedulerAlreadyRunning) as refused:
        start(second)
    message = str(refused.value)
    assert "another Claude Ops scheduler is running sessions on the database" in message
    assert HOLDER in message and "one scheduler runs sessions per database" in message

    with second.app_context():   # Run now on the second host reaches the first host's scheduler
        queued = control.enqueue(trigger="dashboard").id
    wait_for(lambda: session_status(first, queued) == "completed")


def test_the_lock_is_free_again_once_the_first_scheduler_stops(two_hosts):
    first, second, start = two_hosts
    start(first).shutdown()
    start(second)

    def published() -> bool:   # the second scheduler's first heartbeat
        with second.app_context():
            db.session.remove()
            state = db.session.get(SchedulerState, 1)
            return state.pid == os.getpid() and state.heartbeat_at is not None
    wait_for(published)


def test_claudeops_run_refuses_too(two_hosts, tmp_path):
    first, _second, start = two_hosts
    start(first)
    lock = RunnerLock(str(tmp_path / "host-b" / "state"), first.config["CLAUDEOPS_DATABASE_URL"])
    with pytest.raises(SchedulerAlreadyRunning, match="one scheduler runs sessions per database"):
        lock.acquire()
    # The state directory's own lock was given back: only the database refused.
    RunnerLock(str(tmp_path / "host-b" / "state")).acquire()


def test_a_lost_connection_takes_the_lock_again_when_no_one_else_has(checked_by_hand, two_hosts, tmp_path, caplog):
    first, _second, start = two_hosts
    scheduler = start(first)
    assert end_lock_connection(first.config["CLAUDEOPS_DATABASE_URL"]) == 1
    with caplog.at_level(logging.INFO, logger="app.sessions.runner_lock"):
        assert scheduler.verify_lock() is True
    said = [record.getMessage() for record in caplog.records if record.name == "app.sessions.runner_lock"]
    assert said[0].startswith("lost the connection that holds the scheduler's database lock")
    assert said[-1] == "took the scheduler's database lock again; sessions go on being run from here"
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="app.sessions.runner_lock"):
        assert scheduler.verify_lock() is True   # held all along: nothing to say
    assert "took the scheduler's database lock again" not in caplog.text
    other = RunnerLock(str(tmp_path / "host-b" / "state"), first.config["CLAUDEOPS_DATABASE_URL"])
    with pytest.raises(SchedulerAlreadyRunning):
        other.acquire()
    assert not scheduler.shutdown_event.is_set()


def test_the_scheduler_takes_a_lost_lock_again_within_seconds_unasked(two_hosts, tmp_path, caplog):
    """Not at its next heartbeat, up to 15 s later: a second scheduler
    started meanwhile would take the lock and run sessions beside it."""
    first, _second, start = two_hosts
    scheduler = start(first)
    other = RunnerLock(str(tmp_path / "host-b" / "state"), first.config["CLAUDEOPS_DATABASE_URL"])
    with caplog.at_level(logging.INFO, logger="app.sessions.runner_lock"):
        assert end_lock_connection(first.config["CLAUDEOPS_DATABASE_URL"]) == 1
        wait_for(lambda: "took the scheduler's database lock again" in caplog.text, timeout=5)
    with pytest.raises(SchedulerAlreadyRunning):
        other.acquire()
    assert not scheduler.shutdown_event.is_set()


@restarts_the_server
def test_a_server_restart_keeps_the_scheduler_and_its_lock(checked_by_hand, two_hosts, tmp_path, caplog):
    first, _second, start = two_hosts
    scheduler = start(first)
    outage = threading.Thread(target=restart_server, args=(2.0,))
    outage.start()
    wait_for(lambda: not server_answers())
    # The check waits for the server and takes the lock again once it is back.
    assert scheduler.verify_lock() is True
    outage.join(30)
    assert not scheduler.shutdown_event.is_set()
    assert "cannot take the scheduler's database lock again yet" in caplog.text
    other = RunnerLock(str(tmp_path / "host-b" / "state"), first.config["CLAUDEOPS_DATABASE_URL"])
    with pytest.raises(SchedulerAlreadyRunning):
        other.acquire()


def test_a_scheduler_whose_lock_went_to_another_stops_its_session(checked_by_hand, two_hosts, fake_cli, tmp_path):
    first, second, start = two_hosts
    fake_cli(sl.steps(sl.init(), sl.text("working")) + [{"sleep": 60}])
    scheduler = start(first)
    with first.app_context():
        running = control.enqueue(trigger="api").id
    wait_for(lambda: session_status(first, running) == "running")

    url = first.config["CLAUDEOPS_DATABASE_URL"]
    end_lock_connection(url)
    usurper = RunnerLock(str(tmp_path / "host-b" / "state"), url)
    usurper.acquire()
    try:
        assert scheduler.verify_lock() is False
        wait_for(lambda: session_status(first, running) == "stopped", timeout=20)
        assert scheduler.shutdown_event.is_set()
        with first.app_context():   # not put down to a shutdown no one asked for
            assert db.session.get(Session, running).status_reason.startswith(
                "the scheduler lost the database's runner lock (another Claude Ops process took it")
        with first.app_context():   # nothing more is claimed
            later = control.enqueue(trigger="api").id
        time.sleep(2)
        assert session_status(first, later) == "queued"
    finally:
        usurper.release()


@pytest.mark.slow
def test_the_real_scheduler_command_refuses_beside_a_running_service(tmp_path):
    """Two hosts: `claudeops serve` on one, `claudeops scheduler` and
    `claudeops run` on another with the same database URL."""
    (tmp_path / "host-a").mkdir()
    service = Service(tmp_path / "host-a" / "state", {"CLAUDEOPS_INTERVAL": "0",
                                                     "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE)}, workers=1)
    service.start()
    try:
        env = dict(os.environ, CLAUDEOPS_STATE_DIR=str(tmp_path / "host-b" / "state"),
                   CLAUDEOPS_DATABASE_URL=service.env["CLAUDEOPS_DATABASE_URL"],
                   CLAUDEOPS_CLAUDE_BIN=str(FAKE_CLAUDE))
        for command in (["scheduler"], ["run"]):
            result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
            assert result.returncode == 1, result.stderr
            assert "another Claude Ops scheduler is running sessions on the database" in result.stderr
            assert f"claudeops runner on {socket.gethostname()}, pid {service.process.pid}" in result.stderr
    finally:
        assert service.terminate() == 0, service.log()


@pytest.mark.slow
def test_claudeops_serve_exits_when_another_scheduler_took_its_lock(tmp_path):
    (tmp_path / "host-a").mkdir()
    service = Service(tmp_path / "host-a" / "state", {"CLAUDEOPS_INTERVAL": "0",
                                                     "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE)}, workers=1)
    service.start()
    url = service.env["CLAUDEOPS_DATABASE_URL"]
    usurper = RunnerLock(str(tmp_path / "host-b"), url)
    try:
        (tmp_path / "host-b").mkdir()
        take_the_lock_from_its_holder(url, usurper)
        assert service.process.wait(timeout=60) == 1
        assert "no longer holds the database's runner lock" in service.log()
        assert not service.group_alive()   # gunicorn and its workers ended with it
    finally:
        usurper.release()
        service.terminate()


def start_claudeops_run(tmp_path, app, steps: list[dict]) -> subprocess.Popen:
    """`claudeops run` on ``app``'s state directory and database, its CLI following ``steps``."""
    script = tmp_path / "run-script.json"
    script.write_text(json.dumps(steps))
    env = dict(os.environ, CLAUDEOPS_STATE_DIR=app.config["CLAUDEOPS_STATE_DIR"],
               CLAUDEOPS_DATABASE_URL=app.config["CLAUDEOPS_DATABASE_URL"], CLAUDEOPS_CLAUDE_BIN=str(FAKE_CLAUDE),
               FAKE_CLAUDE_SCRIPT=str(script))
    return subprocess.Popen([str(CLAUDEOPS), "run"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def running_session(app) -> int | None:
    with app.app_context():
        db.session.remove()
        return db.session.scalar(select(Session.id).where(Session.status == "running"))


@pytest.mark.slow
def test_claudeops_run_takes_its_lock_again_after_its_connection_is_lost(two_hosts, tmp_path):
    """As the scheduler does: a server restart ends the connection that holds
    the lock, and the run takes it again, so that no scheduler starts beside
    it and a Stop of its session is not refused as if the run had ended."""
    first, second, _start = two_hosts
    url = first.config["CLAUDEOPS_DATABASE_URL"]
    run = start_claudeops_run(tmp_path, first, sl.steps(sl.init(), sl.text("working")) + [{"sleep": 60}]
                              + sl.steps(sl.result("done")))
    try:
        wait_for(lambda: running_session(first) is not None, timeout=30)
        session_id = running_session(first)
        assert end_lock_connection(url) == 1
        time.sleep(3)
        other = RunnerLock(str(tmp_path / "host-b" / "state"), url)
        with pytest.raises(SchedulerAlreadyRunning, match="one scheduler runs sessions per database"):
            other.acquire()
        with second.app_context():   # the other host's dashboard: the run is still there to stop
            assert control.request_stop(session_id).stop_requested
        out, err = run.communicate(timeout=30)
        assert run.returncode == 1, err
        assert session_status(first, session_id) == "stopped"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, 9)
            run.wait()


@pytest.mark.slow
def test_claudeops_run_whose_lock_went_to_another_stops_its_session(two_hosts, tmp_path):
    first, _second, _start = two_hosts
    url = first.config["CLAUDEOPS_DATABASE_URL"]
    run = start_claudeops_run(tmp_path, first, sl.steps(sl.init(), sl.text("working")) + [{"sleep": 60}]
                              + sl.steps(sl.result("done")))
    usurper = RunnerLock(str(tmp_path / "host-b" / "state"), url)
    try:
        wait_for(lambda: running_session(first) is not None, timeout=30)
        session_id = running_session(first)
        take_the_lock_from_its_holder(url, usurper)
        out, err = run.communicate(timeout=30)
        assert run.returncode == 1, err
        with first.app_context():
            db.session.remove()
            session = db.session.get(Session, session_id)
            assert (session.status, session.status_reason) == (
                "stopped", "`claudeops run` lost the database's runner lock (another process took it, or the "
                "database could not be reached again within 60 s)")
    finally:
        usurper.release()
        if run.poll() is None:
            os.killpg(run.pid, 9)
            run.wait()
