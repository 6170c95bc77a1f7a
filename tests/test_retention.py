"""Retention: old sessions lose their activity log and run log files (never
the session row), events and cooldown records past their own retention are
deleted by their plugins, a batch at a time; memories are never touched."""
from __future__ import annotations

import contextlib
import logging
import shutil
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, func, select, text, update

from app import retention
from app.batched_delete import batch_query
from app.extensions import db
from app.hookspecs import hookimpl
from app.models import COMPLETED, FAILED, RUNNING, Session, SessionActivity
from app.runtime import change
from app.sessions import control
from app.sessions.log_pruning import old_sessions
from app.sessions.results_dir import ID_FILE, existing_id, results_dir_id
from app.sessions.scheduler import RETENTION_HOURS, RETENTION_JOB_ID, SessionScheduler
from app.timeutil import utcnow
from plugins.cooldowns.models import CooldownAction
from plugins.events.models import Event
from plugins.memory import store as memories
from plugins.memory import GIVEN_RECORDS, given_to_pruned_sessions
from plugins.memory.models import Memory, MemoryHistory, MemoryInjection
from tests import streamlines as sl
from tests.conftest import make_app
from tests.support.database import sqlite_only
from tests.support.waiting import wait_for

SCRIPT = sl.steps(sl.init(), sl.text("Checked the disks.\n[EVENT:info:nas] disks fine"),
                  sl.tool_use("df -h"), sl.tool_result("/dev/sda1 40%"), sl.result("All good."))


def activity_count(session_id: int) -> int:
    return db.session.scalar(select(func.count()).select_from(SessionActivity)
                             .where(SessionActivity.session_id == session_id))


def ran_days_ago(run_session_now, days: float) -> Session:
    """A session that really ran (activity, run log, stderr log), then made
    to have ended ``days`` ago."""
    session = run_session_now()
    assert session.status == COMPLETED and activity_count(session.id) > 0
    db.session.execute(update(Session).where(Session.id == session.id)
                       .values(ended_at=utcnow() - timedelta(days=days)))
    db.session.commit()
    db.session.expire_all()
    return db.session.get(Session, session.id)


def run_logs(session: Session) -> list[Path]:
    path = Path(session.log_path)
    return [path, path.with_suffix(".stderr.log")]


def add_activity(session_id: int, count: int) -> None:
    db.session.add_all(SessionActivity(session_id=session_id, kind="text", body=f"line {n}") for n in range(count))
    db.session.commit()


def failed_days_ago(days: float, activity: int) -> Session:
    """A session that failed ``days`` ago, with ``activity`` entries and no run log."""
    session = control.enqueue()
    add_activity(session.id, activity)
    db.session.execute(update(Session).where(Session.id == session.id)
                       .values(status=FAILED, ended_at=utcnow() - timedelta(days=days)))
    db.session.commit()
    return session


def test_pruning_removes_only_old_finished_sessions_logs(app, fake_cli, run_session_now):
    fake_cli(SCRIPT)
    old = ran_days_ago(run_session_now, 91)
    recent = ran_days_ago(run_session_now, 89)
    old_files, recent_files = run_logs(old), run_logs(recent)
    assert all(path.exists() for path in old_files + recent_files)
    # A session still running (however long ago it "ended") and a queued one are never touched.
    running = control.enqueue()
    add_activity(running.id, 3)
    db.session.execute(update(Session).where(Session.id == running.id)
                       .values(status=RUNNING, ended_at=utcnow() - timedelta(days=400)))
    queued = control.enqueue()
    add_activity(queued.id, 2)
    memory = memories.create("timing", "nas", "Disks take 5 minutes to spin up")
    db.session.commit()
    old_cost, old_response = old.cost_usd, old.response

    report = retention.prune()

    assert report.counts["sessions' logs"] == 1 and report.counts["run log files"] == 2
    assert report.counts["activity entries"] > 0 and report.bytes_freed > 0
    db.session.expire_all()
    assert activity_count(old.id) == 0 and not any(path.exists() for path in old_files)
    kept = db.session.get(Session, old.id)
    assert (kept.status, kept.cost_usd, kept.response) == (COMPLETED, old_cost, old_response)
    assert kept.log_path is None and kept.logs_removed_at is not None
    assert kept.system_prompt is None   # the largest text a session keeps goes with its logs
    # One whose logs an earlier version removed loses its system prompt at the next pruning.
    db.session.execute(update(Session).where(Session.id == old.id).values(system_prompt="## Earlier"))
    db.session.commit()
    retention.prune()
    db.session.expire_all()
    assert db.session.get(Session, old.id).system_prompt is None
    assert activity_count(recent.id) > 0 and all(path.exists() for path in recent_files)
    assert db.session.get(Session, recent.id).logs_removed_at is None
    assert "## Reporting events" in db.session.get(Session, recent.id).system_prompt
    assert (activity_count(running.id), activity_count(queued.id)) == (3, 2)
    assert db.session.get(Memory, memory.id) is not None
    # The events the old session reported are younger than their own retention.
    assert db.session.scalar(select(func.count()).select_from(Event).where(Event.session_id == old.id)) == 1
    # Done once: the next run finds nothing left to remove.
    assert not retention.prune().anything


@contextlib.contextmanager
def statements_and_commits(prefix: str):
    """The statements run meanwhile that begin with ``prefix``, and how many
    of them had run at each commit."""
    seen, commits = [], []
    engine = db.engine

    def count(conn, cursor, statement, *args):
        if statement.startswith(prefix):
            seen.append(statement)

    def commit(conn):
        commits.append(len(seen))

    event.listen(engine, "before_cursor_execute", count)
    event.listen(engine, "commit", commit)
    try:
        yield seen, commits
    finally:
        event.remove(engine, "before_cursor_execute", count)
        event.remove(engine, "commit", commit)


def test_activity_is_deleted_in_batches_committed_one_by_one(app):
    session = failed_days_ago(100, activity=25)
    with statements_and_commits("DELETE FROM session_activity") as (deletes, commits):
        report = retention.prune(batch_size=10)
    assert report.counts["activity entries"] == 25 and activity_count(session.id) == 0
    assert len(deletes) == 3   # 10, 10, then 5: the last batch is short
    # Each batch was committed before the next one began.
    assert [1, 2, 3] == [n for n in dict.fromkeys(commits) if n]


def test_system_prompts_an_earlier_version_kept_are_cleared_by_id_without_a_locked_scan(app, monkeypatch):
    """A pruning finds them by a read (every pruned session is read: no
    index holds whether a prompt is there) and clears them some sessions at
    a time, each its own transaction."""
    from app.sessions import log_pruning
    monkeypatch.setattr(log_pruning, "SESSIONS_PER_ROUND", 2)
    sessions = [failed_days_ago(100, activity=0) for _ in range(5)]
    db.session.execute(update(Session).where(Session.id.in_([s.id for s in sessions]))
                       .values(logs_removed_at=utcnow(), system_prompt="## Earlier"))
    db.session.commit()
    with statements_and_commits("UPDATE sessions SET system_prompt") as (updates, commits):
        retention.prune()
    db.session.expire_all()
    assert all(db.session.get(Session, s.id).system_prompt is None for s in sessions)
    assert len(updates) == 3 and all("sessions.id IN" in statement for statement in updates)
    assert [1, 2, 3] == [n for n in dict.fromkeys(commits) if n]
    # None left: the next pruning reads and changes nothing.
    with statements_and_commits("UPDATE sessions SET system_prompt") as (updates, _):
        retention.prune()
    assert updates == []


def test_zero_keeps_everything(app, fake_cli, run_session_now):
    fake_cli(SCRIPT)
    old = ran_days_ago(run_session_now, 5000)
    db.session.add(CooldownAction(service="web", action="restart", outcome="success", source="hook",
                                  created_at=utcnow() - timedelta(days=5000)))
    db.session.execute(update(Event).values(created_at=utcnow() - timedelta(days=5000)))
    db.session.commit()
    change({"CLAUDEOPS_LOG_RETENTION_DAYS": 0, "CLAUDEOPS_EVENT_RETENTION_DAYS": 0,
            "CLAUDEOPS_COOLDOWN_RETENTION_DAYS": 0})

    report = retention.prune()

    assert not report.anything and "sessions' logs" not in report.counts   # not even looked for
    assert activity_count(old.id) > 0 and all(path.exists() for path in run_logs(old))
    assert db.session.scalar(select(func.count()).select_from(Event)) == 1
    assert db.session.scalar(select(func.count()).select_from(CooldownAction)) == 1


def test_a_dry_run_deletes_nothing_and_reports_counts(app, fake_cli, run_session_now):
    fake_cli(SCRIPT)
    old = ran_days_ago(run_session_now, 100)
    entries = activity_count(old.id)
    size = sum(path.stat().st_size for path in run_logs(old))
    db.session.execute(update(Event).values(created_at=utcnow() - timedelta(days=400)))
    db.session.commit()

    report = retention.prune(dry_run=True)

    assert report.dry_run
    assert report.counts == {"sessions' logs": 1, "activity entries": entries, "run log files": 2,
                             "events": 1, "cooldown records": 0, GIVEN_RECORDS: 0}
    assert report.bytes_freed == size
    db.session.expire_all()
    assert activity_count(old.id) == entries and all(path.exists() for path in run_logs(old))
    assert db.session.get(Session, old.id).logs_removed_at is None
    assert db.session.scalar(select(func.count()).select_from(Event)) == 1


def test_a_missing_run_log_is_a_warning_and_a_file_outside_the_results_dir_is_never_deleted(
        app, fake_cli, run_session_now, tmp_path, caplog):
    fake_cli(SCRIPT)
    missing = ran_days_ago(run_session_now, 100)
    run_logs(missing)[0].unlink()
    elsewhere = ran_days_ago(run_session_now, 100)
    outside = tmp_path / "elsewhere" / "session.ndjson"
    outside.parent.mkdir()
    outside.write_text("{}\n")
    db.session.execute(update(Session).where(Session.id == elsewhere.id).values(log_path=str(outside)))
    db.session.commit()

    with caplog.at_level(logging.WARNING, logger="app.sessions.log_pruning"):
        report = retention.prune()

    assert report.counts["sessions' logs"] == 2 and report.counts["run log files"] == 1   # the stderr log
    assert "is already gone" in caplog.text and "not inside the results directory" in caplog.text
    assert outside.exists()
    # The stderr log beside the file outside was never there: a crash leaves none, and it is no news.
    assert "stderr.log is already gone" not in caplog.text
    db.session.expire_all()
    assert activity_count(missing.id) == 0 and activity_count(elsewhere.id) == 0
    # The file left in place is still offered; the other session's are gone.
    assert db.session.get(Session, elsewhere.id).log_path == str(outside)
    assert db.session.get(Session, missing.id).log_path is None


def refuse_to_remove(path: Path, monkeypatch) -> None:
    """``path`` cannot be removed, as if another user's."""
    real_unlink = Path.unlink

    def refused(candidate, *args, **kwargs):
        if candidate == path:
            raise PermissionError(1, "Operation not permitted")
        return real_unlink(candidate, *args, **kwargs)
    monkeypatch.setattr(Path, "unlink", refused)


def test_a_run_log_that_cannot_be_removed_is_tried_again_at_the_next_pruning(app, fake_cli, run_session_now,
                                                                            monkeypatch, caplog):
    """Another user's file, say: it is said, and tried again (and said again)
    until it goes, rather than the session marked pruned and the space it
    holds never freed."""
    fake_cli(SCRIPT)
    session = ran_days_ago(run_session_now, 100)
    run_log = run_logs(session)[0]
    refuse_to_remove(run_log, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="app.sessions.log_pruning"):
        first = retention.prune()
    assert f"cannot remove {run_log} (Operation not permitted); it is tried again" in caplog.text
    assert first.counts["sessions' logs"] == 0 and first.counts["run log files"] == 1   # the stderr log
    db.session.expire_all()
    assert db.session.get(Session, session.id).logs_removed_at is None
    monkeypatch.undo()
    second = retention.prune()
    assert second.counts["sessions' logs"] == 1 and second.counts["run log files"] == 1 and not run_log.exists()
    db.session.expire_all()
    pruned = db.session.get(Session, session.id)
    assert pruned.logs_removed_at is not None and pruned.log_path is None


def test_a_session_whose_run_log_cannot_be_removed_yet_keeps_its_activity_log(app, client, fake_cli,
                                                                              run_session_now, monkeypatch):
    """Not marked pruned until its run log goes, its page cannot say the
    activity log was removed: emptied meanwhile, it would be shown empty,
    unexplained, for as long as the file stays."""
    fake_cli(SCRIPT)
    session = ran_days_ago(run_session_now, 100)
    kept = activity_count(session.id)
    run_log = run_logs(session)[0]
    refuse_to_remove(run_log, monkeypatch)
    assert retention.prune().counts.get("activity entries", 0) == 0
    assert activity_count(session.id) == kept
    page = client.get(f"/sessions/{session.id}").get_data(as_text=True)
    assert "df -h" in page and "activity-removed" not in page
    monkeypatch.undo()
    assert retention.prune().counts["activity entries"] == kept and activity_count(session.id) == 0
    assert "activity-removed" in client.get(f"/sessions/{session.id}").get_data(as_text=True)


def test_a_link_outside_the_results_dir_to_a_file_inside_is_never_deleted(app, fake_cli, run_session_now,
                                                                          tmp_path):
    fake_cli(SCRIPT)
    session = ran_days_ago(run_session_now, 100)
    inside = run_logs(session)[0]
    link = tmp_path / "elsewhere" / "linked.ndjson"
    link.parent.mkdir()
    link.symlink_to(inside)
    db.session.execute(update(Session).where(Session.id == session.id).values(log_path=str(link)))
    db.session.commit()
    retention.prune()
    assert link.is_symlink() and inside.exists()


def test_a_results_directory_removed_while_the_service_runs_is_made_again_with_an_id(app, tmp_path):
    results_dir = tmp_path / "gone" / "results"
    assert results_dir_id(results_dir) == (results_dir / ID_FILE).read_text()
    assert results_dir.stat().st_mode & 0o777 == 0o700
    first = existing_id(results_dir)
    shutil.rmtree(tmp_path / "gone")
    again = results_dir_id(results_dir)
    assert again is not None and again != first and again == existing_id(results_dir)


def test_a_results_directory_id_that_is_no_text_is_an_os_error_naming_the_file(app, tmp_path):
    """The agent, as the service's user, could write anything there: it is
    a file that cannot be read, said so, not a UnicodeDecodeError in the
    session page or in retention."""
    from app.sessions.results_dir import held_elsewhere
    from app.state_files import NotText
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    (results_dir / ID_FILE).write_bytes(b"\xff\xfe")
    with pytest.raises(NotText, match="it is not UTF-8 text") as raised:
        existing_id(results_dir)
    assert raised.value.filename == str(results_dir / ID_FILE)
    assert held_elsewhere("some-id", results_dir) is False   # a directory it cannot read is not said to be elsewhere
    assert results_dir_id(results_dir) is None               # the run log goes on without an id, with a warning


def test_a_host_without_a_sessions_run_logs_leaves_it_whole_to_the_host_that_has_them(
        app, fake_cli, run_session_now, tmp_path):
    """One database, two hosts: the scheduler's, which holds the run logs in
    its results directory, and a dashboard's, where ``claudeops prune`` finds
    none of them and must not take them for gone."""
    from app.cli import main
    fake_cli(SCRIPT)
    ran_here = ran_days_ago(run_session_now, 92)   # 90 days' retention
    files = run_logs(ran_here)
    results_dir = Path(app.config["CLAUDEOPS_RESULTS_DIR"])
    assert ran_here.results_dir_id == (results_dir / ID_FILE).read_text()
    assert (results_dir / ID_FILE).stat().st_mode & 0o777 == 0o600
    assert run_session_now().results_dir_id == ran_here.results_dir_id   # one id per directory
    before = failed_days_ago(100, activity=3)   # recorded no results directory: pruned anywhere, as before
    # Left by its host a week past its retention: no host's, pruned anywhere.
    forsaken = ran_days_ago(run_session_now, 90 + 7 + 1)
    forsaken_files = run_logs(forsaken)
    dashboard = make_app(tmp_path / "dashboard", CLAUDEOPS_DATABASE_URL=app.config["CLAUDEOPS_DATABASE_URL"])
    assert not any((Path(dashboard.config["CLAUDEOPS_RESULTS_DIR"])).iterdir())

    with dashboard.app_context():
        dry = dashboard.test_cli_runner().invoke(main, ["prune", "--dry-run"])
        assert dry.exit_code == 0, dry.output
        assert "  2 sessions' logs\n" in dry.output
        report = retention.prune()
        assert (report.counts["sessions' logs"], report.left_to_their_host) == (2, 1)
        assert report.counts["run log files"] == 0   # the forsaken session's are not on this host
        done = dashboard.test_cli_runner().invoke(main, ["prune"])
        assert done.output.startswith("Left to the host that ran them: 1 sessions' logs (their run logs are in its "
                                      "results directory, and its scheduler removes them)\nRetention in force:\n")
        db.session.remove()

    db.session.expire_all()
    assert activity_count(before.id) == 0 and db.session.get(Session, before.id).logs_removed_at is not None
    assert activity_count(forsaken.id) == 0 and db.session.get(Session, forsaken.id).logs_removed_at is not None
    assert activity_count(ran_here.id) > 0 and all(path.exists() for path in files)
    assert db.session.get(Session, ran_here.id).logs_removed_at is None
    assert all(path.exists() for path in forsaken_files)
    assert db.session.get(Session, forsaken.id).log_path == str(forsaken_files[0])
    # The scheduler's host removes them, and the files of the session the dashboard's host pruned.
    report = retention.prune()
    assert (report.counts["sessions' logs"], report.counts["run log files"], report.left_to_their_host) == (1, 4, 0)
    db.session.expire_all()
    assert activity_count(ran_here.id) == 0 and not any(path.exists() for path in files + forsaken_files)
    assert db.session.get(Session, ran_here.id).logs_removed_at is not None
    assert db.session.get(Session, forsaken.id).log_path is None
    assert retention.prune().counts["run log files"] == 0   # done once


def test_a_session_page_says_when_its_run_log_is_on_another_host(app, client, fake_cli, run_session_now, tmp_path):
    """The path is the scheduler's host's: on a dashboard's host (one
    PostgreSQL behind both, here one SQLite file) it names no file there."""
    fake_cli(SCRIPT)
    session = run_session_now()
    here = client.get(f"/sessions/{session.id}").get_data(as_text=True)
    assert session.log_path in here and 'id="log-elsewhere"' not in here

    dashboard = make_app(tmp_path / "dashboard", CLAUDEOPS_DATABASE_URL=app.config["CLAUDEOPS_DATABASE_URL"])
    with dashboard.app_context():
        for path in (f"/sessions/{session.id}", f"/sessions/{session.id}/live"):
            page = dashboard.test_client().get(path, headers={"HX-Request": "true"} if "live" in path else {})
            text = page.get_data(as_text=True)
            assert page.status_code == 200 and session.log_path in text, path
            assert 'id="log-elsewhere"' in text and "not this one" in text, path
        db.session.remove()


def test_a_results_directory_that_cannot_take_its_id_is_said_and_the_session_records_none(tmp_path, caplog):
    not_a_directory = tmp_path / "results"
    not_a_directory.write_text("a file")
    with caplog.at_level(logging.WARNING, logger="app.sessions.results_dir"):
        assert results_dir_id(not_a_directory) is None
    assert f"cannot record the id of the results directory {not_a_directory}" in caplog.text
    assert existing_id(tmp_path) is None
    made = results_dir_id(tmp_path)
    assert len(made) == 32 and existing_id(tmp_path) == made == results_dir_id(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == [ID_FILE, "results"]   # no draft left


def test_the_session_page_says_the_activity_log_was_removed(app, client, fake_cli, run_session_now):
    fake_cli(SCRIPT)
    old = ran_days_ago(run_session_now, 95)
    page = client.get(f"/sessions/{old.id}").get_data(as_text=True)
    assert "Run log</dt>" in page and "activity-removed" not in page

    retention.prune(now=old.ended_at + timedelta(days=90, hours=1))

    page = client.get(f"/sessions/{old.id}").get_data(as_text=True)
    assert "Activity log removed 90 days after the session ended, by retention (CLAUDEOPS_LOG_RETENTION_DAYS)," in page
    assert ", with the run log files and the system prompt." in page
    assert "Run log</dt>" not in page and "Checked the disks." in page   # the response is kept
    api = client.get(f"/api/v1/sessions/{old.id}").get_json()
    assert api["logs_removed_at"] is not None and api["status"] == COMPLETED


def test_a_log_removed_later_than_its_retention_is_not_said_to_have_been_kept_that_long(app, client, fake_cli,
                                                                                      run_session_now):
    """The first pruning after an upgrade, or after the setting was lowered,
    removes logs far older than the retention: the page gives the age at
    removal as what it is, not as the setting."""
    fake_cli(SCRIPT)
    old = ran_days_ago(run_session_now, 400)
    retention.prune(now=old.ended_at + timedelta(days=365, hours=1))
    page = " ".join(client.get(f"/sessions/{old.id}").get_data(as_text=True).split())
    assert "after 365 days (CLAUDEOPS_LOG_RETENTION_DAYS)" not in page
    assert "Activity log removed 365 days after the session ended, by retention (CLAUDEOPS_LOG_RETENTION_DAYS)," in page


def test_a_session_that_never_ran_is_not_said_to_have_lost_its_logs(app, client):
    """Stopped while queued, it had no activity log and no run log: its page
    does not claim retention removed them."""
    never_ran = control.enqueue()
    control.request_stop(never_ran.id)
    db.session.execute(update(Session).where(Session.id == never_ran.id)
                       .values(ended_at=utcnow() - timedelta(days=100)))
    db.session.commit()
    assert retention.prune().counts["sessions' logs"] == 1   # marked, so that it is not read again
    page = client.get(f"/sessions/{never_ran.id}").get_data(as_text=True)
    assert "activity-removed" not in page and "Activity log removed" not in page


def given_to(session_id: int) -> list[int]:
    return list(db.session.scalars(select(MemoryInjection.memory_id).where(MemoryInjection.session_id == session_id)
                                   .order_by(MemoryInjection.position)))


def test_which_memories_a_session_was_given_goes_with_its_logs(app, client, fake_cli, run_session_now):
    fake_cli(SCRIPT)
    kept = [memories.create("timing", "nas", "Disks take 5 minutes to spin up"),
            memories.create("dependency", "web", "Needs postgres up first")]
    db.session.commit()
    old = ran_days_ago(run_session_now, 91)
    recent = ran_days_ago(run_session_now, 89)
    running = control.enqueue()
    db.session.add(MemoryInjection(session_id=running.id, memory_id=kept[0].id, confidence=0.7, position=0))
    db.session.execute(update(Session).where(Session.id == running.id)
                       .values(status=RUNNING, ended_at=utcnow() - timedelta(days=400)))
    db.session.commit()
    assert len(given_to(old.id)) == len(given_to(recent.id)) == 2
    history = db.session.scalar(select(func.count()).select_from(MemoryHistory))

    assert retention.prune(dry_run=True).counts[GIVEN_RECORDS] == 2
    assert len(given_to(old.id)) == 2

    report = retention.prune(batch_size=1)

    assert report.counts[GIVEN_RECORDS] == 2
    assert given_to(old.id) == [] and len(given_to(recent.id)) == 2
    # A running session may still score what it was given ([OUTCOME:…]): never touched.
    assert given_to(running.id) == [kept[0].id]
    # The memories, their history and what the memory's page shows of recent sessions stay.
    assert [db.session.get(Memory, memory.id) is not None for memory in kept] == [True, True]
    assert db.session.scalar(select(func.count()).select_from(MemoryHistory)) == history
    page = client.get(f"/memories/{kept[0].id}").get_data(as_text=True)
    assert f"session #{recent.id}" in page and f"session #{old.id}<" not in page
    assert not retention.prune().counts.get(GIVEN_RECORDS)   # done once
    change({"CLAUDEOPS_LOG_RETENTION_DAYS": 0})
    db.session.execute(update(Session).where(Session.id == recent.id).values(ended_at=utcnow() - timedelta(days=999)))
    db.session.commit()
    assert GIVEN_RECORDS not in retention.prune().counts and len(given_to(recent.id)) == 2


def test_events_past_their_retention_are_deleted(app):
    now = utcnow()
    for days in (400, 366, 364, 1):
        db.session.add(Event(level="info", message=f"{days} days old", created_at=now - timedelta(days=days)))
    db.session.commit()
    assert retention.prune(now=now, batch_size=1).counts["events"] == 2
    assert sorted(db.session.scalars(select(Event.message))) == ["1 days old", "364 days old"]
    change({"CLAUDEOPS_EVENT_RETENTION_DAYS": 7})
    assert retention.prune(now=now).counts["events"] == 1


def test_cooldown_records_inside_a_limits_window_are_never_deleted(app):
    now = utcnow()
    for days in (40, 20, 5):
        db.session.add(CooldownAction(service="web", action="restart", outcome="success", source="hook",
                                      command=f"{days} days old", created_at=now - timedelta(days=days)))
    db.session.commit()
    # A week's retention, but a 30-day window still counts the record of 20 days ago.
    change({"CLAUDEOPS_COOLDOWN_RETENTION_DAYS": 7, "CLAUDEOPS_COOLDOWN_REDEPLOYMENT_LIMIT": "1/30d"})
    assert retention.prune(now=now, dry_run=True).counts["cooldown records"] == 1
    assert retention.prune(now=now).counts["cooldown records"] == 1
    assert sorted(db.session.scalars(select(CooldownAction.command))) == ["20 days old", "5 days old"]
    # With the default windows (4h, 24h), the week's retention is what counts.
    change({"CLAUDEOPS_COOLDOWN_REDEPLOYMENT_LIMIT": None})
    assert retention.prune(now=now).counts["cooldown records"] == 1
    assert list(db.session.scalars(select(CooldownAction.command))) == ["5 days old"]


class Pruner:
    """A third-party plugin with a table of its own (here: pretend)."""

    def __init__(self):
        self.calls = []

    @hookimpl
    def claudeops_prune(self, now, dry_run, batch_size):
        self.calls.append((now, dry_run, batch_size))
        return {"widgets": 0 if dry_run else 7}


class BrokenPruner:
    @hookimpl
    def claudeops_prune(self, now):
        raise RuntimeError("prune bug")


def test_hook_claudeops_prune_is_called_and_its_counts_reported(tmp_path, caplog):
    pruner = Pruner()
    app = make_app(tmp_path, plugins=[BrokenPruner(), pruner])
    now = utcnow()
    with app.app_context():
        report = retention.prune(now=now, batch_size=123)
        assert pruner.calls == [(now, False, 123)]
        assert report.counts["widgets"] == 7 and report.counts["events"] == 0
        assert "plugin" in caplog.text and "claudeops_prune" in caplog.text and "prune bug" in caplog.text
        assert retention.prune(dry_run=True).counts["widgets"] == 0
        assert pruner.calls[-1][1] is True


def test_the_cli_prunes_and_prints_what_it_removed(app, fake_cli, run_session_now):
    from app.cli import main
    fake_cli(SCRIPT)
    old = ran_days_ago(run_session_now, 100)
    runner = app.test_cli_runner()

    dry = runner.invoke(main, ["prune", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.startswith("Would remove (a dry run: nothing was removed):\n  1 sessions' logs\n")
    assert "  2 run log files (" in dry.output and "  0 events\n" in dry.output
    assert activity_count(old.id) > 0

    done = runner.invoke(main, ["prune"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("Removed:\n  1 sessions' logs\n")
    db.session.expire_all()
    assert activity_count(old.id) == 0

    periods = ("Retention in force:\n"
               "  CLAUDEOPS_LOG_RETENTION_DAYS=90 (90 days)\n"
               "  CLAUDEOPS_COOLDOWN_RETENTION_DAYS=365 (365 days)\n"
               "  CLAUDEOPS_EVENT_RETENTION_DAYS=365 (365 days)\n")
    assert done.output.endswith(periods)
    assert runner.invoke(main, ["prune"]).output == "Nothing is past its retention.\n" + periods
    change({"CLAUDEOPS_LOG_RETENTION_DAYS": 0, "CLAUDEOPS_EVENT_RETENTION_DAYS": 30})   # in force at once
    assert runner.invoke(main, ["prune"]).output == (
        "Nothing is past its retention.\nRetention in force:\n"
        "  CLAUDEOPS_LOG_RETENTION_DAYS=0 (kept forever)\n"
        "  CLAUDEOPS_COOLDOWN_RETENTION_DAYS=365 (365 days)\n"
        "  CLAUDEOPS_EVENT_RETENTION_DAYS=30 (30 days)\n")
    change({"CLAUDEOPS_EVENT_RETENTION_DAYS": 1})
    assert "  CLAUDEOPS_EVENT_RETENTION_DAYS=1 (1 day)\n" in runner.invoke(main, ["prune"]).output
    help_text = runner.invoke(main, ["prune", "--help"]).output
    assert "--dry-run" in help_text and "CLAUDEOPS_LOG_RETENTION_DAYS" in help_text


def test_the_scheduler_prunes_at_start_and_daily(app, fake_cli, run_session_now):
    fake_cli(SCRIPT)
    old = ran_days_ago(run_session_now, 100)
    app.config["CLAUDEOPS_INTERVAL"] = 0
    scheduler = SessionScheduler(app)
    scheduler.start()
    try:
        job = scheduler._aps.get_job(RETENTION_JOB_ID)
        assert job is not None and job.trigger.interval == timedelta(hours=RETENTION_HOURS) == timedelta(days=1)
        # Run however late a loaded machine lets it (APScheduler's default would skip a day).
        assert (job.misfire_grace_time, job.coalesce) == (None, True)
        heartbeat = scheduler._aps.get_job("heartbeat")
        assert (heartbeat.misfire_grace_time, heartbeat.coalesce) == (None, True)

        def pruned():
            db.session.remove()
            return db.session.get(Session, old.id).logs_removed_at is not None
        wait_for(pruned, timeout=15)
        assert activity_count(old.id) == 0
    finally:
        scheduler.shutdown()


def test_a_prune_the_database_refuses_is_one_line_in_the_log_and_a_mistake_keeps_its_traceback(
        app, monkeypatch, caplog):
    import sqlite3
    from sqlalchemy.exc import OperationalError
    scheduler = SessionScheduler(app)
    monkeypatch.setattr(scheduler, "verify_lock", lambda: True)

    def full(**kwargs):
        raise OperationalError("DELETE FROM events", {}, sqlite3.OperationalError("database or disk is full"))
    monkeypatch.setattr(retention, "prune", full)
    with caplog.at_level(logging.ERROR, logger="app.sessions.scheduler"):
        scheduler._prune()
    [record] = caplog.records
    assert not record.exc_info
    assert record.getMessage() == (f"retention failed (the disk holding the database is full (database or disk is "
                                   f"full)); it runs again in {RETENTION_HOURS} hours")

    caplog.clear()

    def broken(**kwargs):
        raise KeyError("a mistake")
    monkeypatch.setattr(retention, "prune", broken)
    with caplog.at_level(logging.ERROR, logger="app.sessions.scheduler"):
        scheduler._prune()
    [record] = caplog.records
    assert record.exc_info is not None and record.exc_info[0] is KeyError


def test_a_shutdown_ends_pruning_between_two_batches_and_marks_no_session_half_done(app):
    from app.batched_delete import stop_pruning_on
    session = failed_days_ago(100, activity=10)
    stop = threading.Event()
    stop_pruning_on(stop)
    stop.set()
    report = retention.prune(batch_size=3)
    assert report.counts["activity entries"] == 0 and "events" not in report.counts
    db.session.expire_all()
    assert activity_count(session.id) == 10 and db.session.get(Session, session.id).logs_removed_at is None
    stop.clear()   # the next run finishes it
    assert retention.prune(batch_size=3).counts["activity entries"] == 10


def test_a_shutdown_during_a_prune_lets_the_batch_under_way_finish_and_starts_no_other(app):
    from app.batched_delete import stop_pruning_on
    session = failed_days_ago(100, activity=10)
    stop = threading.Event()
    stop_pruning_on(stop)
    deletes = []

    def shutdown_after_the_first_delete(conn, cursor, statement, *args):
        if statement.startswith("DELETE FROM"):
            deletes.append(statement)
            stop.set()

    event.listen(db.engine, "before_cursor_execute", shutdown_after_the_first_delete)
    try:
        report = retention.prune(batch_size=3)
    finally:
        event.remove(db.engine, "before_cursor_execute", shutdown_after_the_first_delete)
    assert len(deletes) == 1 and report.counts["activity entries"] == 3 and "events" not in report.counts
    db.session.expire_all()
    assert activity_count(session.id) == 7 and db.session.get(Session, session.id).logs_removed_at is None


@sqlite_only("reads SQLite's EXPLAIN QUERY PLAN; PostgreSQL's planner chooses by statistics")
def test_every_prune_query_uses_an_index(app):
    def plan(statement):
        compiled = statement.compile(dialect=db.engine.dialect, compile_kwargs={"literal_binds": True})
        return " ".join(row[3] for row in db.session.execute(text(f"EXPLAIN QUERY PLAN {compiled}")))

    now = utcnow()
    assert "ix_sessions_logs_removed_at_ended_at (logs_removed_at=? AND ended_at<?)" in plan(old_sessions(now))
    activity = plan(batch_query(SessionActivity, [SessionActivity.session_id.in_([1, 2, 3])], 5000))
    assert "ix_session_activity_session_id_id (session_id=?)" in activity, activity
    events = plan(batch_query(Event, [Event.created_at < now], 5000))
    assert "ix_events_created_at (created_at<?)" in events, events
    given = plan(batch_query(MemoryInjection, given_to_pruned_sessions(now), 5000))
    assert "ix_sessions_logs_removed_at_ended_at (logs_removed_at>?)" in given, given
    assert "ix_memory_injections_session_id (session_id=?)" in given, given
    cooldowns = plan(batch_query(CooldownAction, [CooldownAction.created_at < now], 5000))
    assert "ix_cooldown_actions_created_at (created_at<?)" in cooldowns, cooldowns


def test_retention_settings_refuse_what_they_cannot_mean(app):
    from app.runtime import SettingError
    for name in ("CLAUDEOPS_LOG_RETENTION_DAYS", "CLAUDEOPS_EVENT_RETENTION_DAYS",
                 "CLAUDEOPS_COOLDOWN_RETENTION_DAYS"):
        with pytest.raises(SettingError, match="must be from 0"):
            change({name: -1})
    assert app.config["CLAUDEOPS_LOG_RETENTION_DAYS"] == 90
    assert app.config["CLAUDEOPS_EVENT_RETENTION_DAYS"] == 365 == app.config["CLAUDEOPS_COOLDOWN_RETENTION_DAYS"]
