"""`claudeops run` killed outright (SIGKILL, the OOM killer), as real
processes: what it left running or queued for itself is ended by the next
process that runs sessions (`claudeops run` or the scheduler), and what a
live one holds, or the scheduler's queue, is never taken from it."""
from __future__ import annotations

import subprocess

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from app.extensions import db
from app.models import Session
from app.sessions import control
from app.sessions.recovery import ABANDONED_REASON
from plugins.events.models import Event
from tests import streamlines as sl
from tests.conftest import make_app
from tests.support.faults import SchedulerProcess
from tests.support.waiting import wait_for
from tests.test_cli import CLAUDEOPS, claudeops_env, stored_sessions

ABANDONED_EVENT = f"Escalation session #2 (tier 2) was {ABANDONED_REASON}"


def start_run_held_between_sessions(tmp_path, fake_cli) -> subprocess.Popen:
    """`claudeops run`, held between the first two sessions of its chain:
    the first one's response, more than a pipe holds, fills the stdout that
    nothing reads yet, so the process blocks printing it, with its
    escalation queued and not yet claimed."""
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the disk is full\n" + "x" * 150_000), sl.result("Escalating.")))
    process = subprocess.Popen([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)

    def held() -> bool:
        assert process.poll() is None, "claudeops run ended"
        try:
            return stored_sessions(tmp_path) == [(1, "cli", "completed"), (2, "escalation", "queued")]
        except DBAPIError:   # not migrated yet
            return False
    wait_for(held, timeout=60, what="the escalation queued")
    return process


def sessions() -> dict[int, Session]:
    db.session.remove()
    return {s.id: s for s in db.session.scalars(select(Session))}


def warnings() -> list[str]:
    return list(db.session.scalars(select(Event.message).where(Event.level == "warning").order_by(Event.id)))


def test_the_next_run_ends_the_escalation_a_killed_run_left_queued(tmp_path, fake_cli):
    killed = start_run_held_between_sessions(tmp_path, fake_cli)
    killed.kill()
    killed.wait(10)
    app = make_app(tmp_path)
    with app.app_context():
        theirs = control.enqueue(tier=1, trigger="dashboard").id   # the scheduler's to run, not this run's
    fake_cli(sl.steps(sl.init(), sl.result("All healthy.")))
    result = subprocess.run([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "session #4: completed"   # its own session, not the orphan
    assert ABANDONED_EVENT in result.stderr
    with app.app_context():
        found = sessions()
        orphan = found[2]
        assert (orphan.status, orphan.status_reason, orphan.started_at) == ("interrupted", ABANDONED_REASON, None)
        assert orphan.ended_at is not None
        assert found[theirs].status == "queued"
        assert warnings()[-1] == ABANDONED_EVENT


def test_the_scheduler_ends_the_escalation_a_killed_run_left_queued_and_runs_its_own_queue(tmp_path, fake_cli):
    killed = start_run_held_between_sessions(tmp_path, fake_cli)
    killed.kill()
    killed.wait(10)
    app = make_app(tmp_path)
    with app.app_context():
        theirs = control.enqueue(tier=1, trigger="dashboard").id
    fake_cli(sl.steps(sl.init(), sl.result("All healthy.")))
    scheduler = SchedulerProcess(dict(claudeops_env(tmp_path), CLAUDEOPS_INTERVAL="0"), tmp_path / "scheduler.log")
    scheduler.start()
    try:
        scheduler.wait_started()
        with app.app_context():
            wait_for(lambda: sessions()[theirs].finished, timeout=30, what="the dashboard's session run")
            found = sessions()
            assert found[theirs].status == "completed"
            assert (found[2].status, found[2].status_reason, found[2].started_at) == (
                "interrupted", ABANDONED_REASON, None)
            assert warnings()[-1] == ABANDONED_EVENT
        assert ABANDONED_EVENT in scheduler.log()
    finally:
        assert scheduler.terminate() == 0


def test_the_next_run_marks_the_session_a_killed_run_left_running_interrupted(tmp_path, fake_cli):
    started = fake_cli(sl.steps(sl.init(), sl.text("working")) + [{"sleep": 60}])
    killed = subprocess.Popen([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    wait_for(lambda: started.exists() or killed.poll() is not None, timeout=60, what="the CLI started")
    killed.kill()
    killed.wait(10)
    assert stored_sessions(tmp_path) == [(1, "cli", "running")]
    fake_cli(sl.steps(sl.init(), sl.result("All healthy.")))
    result = subprocess.run([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert stored_sessions(tmp_path) == [(1, "cli", "interrupted"), (2, "cli", "completed")]


def test_a_stop_of_the_session_a_killed_run_left_running_is_refused_and_its_page_says_why(tmp_path, fake_cli):
    """Nothing would ever act on it: the Stop would be taken (202) and the
    session stay running, with Stop offered, until the next start. Whether
    the run has ended is told by whether any process holds the runner lock,
    which is not taken to tell it."""
    started = fake_cli(sl.steps(sl.init(), sl.text("working")) + [{"sleep": 60}])
    killed = subprocess.Popen([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    wait_for(lambda: started.exists() or killed.poll() is not None, timeout=60, what="the CLI started")
    dashboard = make_app(tmp_path, upgrade=False)
    client = dashboard.test_client()
    with dashboard.app_context():
        assert control.runner_ended(db.session.get(Session, 1)) is None   # alive
        killed.kill()
        killed.wait(10)
        wait_for(lambda: control.runner_ended(db.session.get(Session, 1, populate_existing=True)), timeout=15,
                 what="the run known to have ended")
        refused = client.post("/api/v1/sessions/1/stop")
        assert refused.status_code == 409
        assert refused.get_json()["error"] == (
            "session 1 is no longer running: the `claudeops run` that ran it has ended (its process is gone, and its "
            "CLI with it); it is marked interrupted when the service starts again")
        page = client.get("/sessions/1").get_data(as_text=True)
        assert "that ran this\n      session has ended without saying so (killed, or it crashed)" in page
        assert "the scheduler has ended" not in page
        assert db.session.get(Session, 1, populate_existing=True).stop_requested is False


def test_a_scheduler_cannot_take_the_escalation_of_a_run_still_alive(tmp_path, fake_cli):
    held = start_run_held_between_sessions(tmp_path, fake_cli)
    try:
        refused = subprocess.run([str(CLAUDEOPS), "scheduler"], env=claudeops_env(tmp_path), capture_output=True,
                                 text=True, timeout=60)
        assert refused.returncode == 1
        assert f"another Claude Ops process (pid {held.pid}) is running sessions" in refused.stderr
        assert stored_sessions(tmp_path)[-1] == (2, "escalation", "queued")
        output, _ = held.communicate(timeout=120)   # read at last: the run goes on with its chain
    finally:
        if held.poll() is None:
            held.kill()
            held.wait(10)
    assert held.returncode == 0
    assert [line for line in output.splitlines() if line.startswith("session #")][-1] == "session #3: completed"
    assert stored_sessions(tmp_path) == [(1, "cli", "completed"), (2, "escalation", "completed"),
                                         (3, "escalation", "completed")]
