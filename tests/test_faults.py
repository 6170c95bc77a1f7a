"""Faults, each a test: how a session ends when the CLI, the scheduler, the
database or the disk fails under it, and what is kept.

Every test asserts the outcome an operator would check: the session's status
and reason, the rows already written (still there, nothing half-written), and
that the CLI's whole process group is gone (``os.killpg(pgid, 0)`` raises
``ProcessLookupError``). Stop requests from the dashboard are covered in
tests/test_session_manager.py (test_stop_request_ends_the_session_and_its_group)
and SIGTERM to `claudeops serve` in tests/test_serve.py.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import pytest
from sqlalchemy import event as sqlalchemy_event
from sqlalchemy import inspect as sqlalchemy_inspect
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from app import create_app, dbfaults, extensions
from app.extensions import db
from app.hookspecs import hookimpl
from app.models import SchedulerState, Session, SessionActivity
from app.plugin_types import PromptSection, SessionResult
from app.runtime import change
from app.sessions import control, escalation
from app.sessions import manager as manager_module
from app.sessions.manager import run_info, run_session
from app.sessions.scheduler import SessionScheduler
from app.timeutil import utcnow
from app.web import DATABASE_UNAVAILABLE
from plugins.cooldowns.models import CooldownAction
from plugins.events.models import Event
from plugins.memory.models import Memory
from tests import streamlines as sl
from tests.conftest import FAKE_CLAUDE, make_app
from tests.support.database import (database_url, on_postgres, restart_server, restarts_the_server, server_answers,
                                     sqlite_only)
from tests.support.faults import (SchedulerProcess, assert_group_ends, bind_read_only, connect, group_alive,
                                  integrity, mount_tmpfs, read_pid, read_pid_and_group, unmount, wait_for)
from tests.support.service import Service


def events_of(session_id: int) -> list[str]:
    """The events the session's agent reported: not the service's notice of how it ended."""
    return [message for message in all_events_of(session_id) if not message.startswith(f"Session #{session_id} (")]


def all_events_of(session_id: int) -> list[str]:
    db.session.remove()
    return list(db.session.scalars(select(Event.message).where(Event.session_id == session_id).order_by(Event.id)))


def activity_kinds(session_id: int) -> list[str]:
    return list(db.session.scalars(select(SessionActivity.kind).where(SessionActivity.session_id == session_id)
                                   .order_by(SessionActivity.id)))


def db_path(app) -> Path:
    return Path(app.config["CLAUDEOPS_STATE_DIR"]) / "claudeops.db"


def marker_steps(count: int, pause: float, service: str = "web") -> list[dict]:
    steps = []
    for number in range(1, count + 1):
        steps += [{"line": sl.text(f"[EVENT:info:{service}] marker {number}")}, {"sleep": pause}]
    return steps


# --- the CLI ---------------------------------------------------------------------

def test_cli_killed_mid_stream_fails_the_session_and_keeps_what_it_wrote(
        app, fake_cli, run_session_now, cli_pid_file, orphan_pid_file):
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:warning:db] written before the kill"))
             + [{"orphan": 60}, {"sleep": 60}])
    seen = {}

    def kill_the_cli():
        seen["pid"], seen["pgid"] = read_pid_and_group(cli_pid_file)
        read_pid(orphan_pid_file)   # the marker line is out before the orphan starts
        time.sleep(0.5)
        os.kill(seen["pid"], signal.SIGKILL)
    killer = threading.Thread(target=kill_the_cli)
    killer.start()
    session = run_session_now()
    killer.join()
    assert session.status == "failed"
    assert "the Claude CLI was killed by signal 9" in session.status_reason
    assert session.exit_code == -signal.SIGKILL
    assert session.response == "[EVENT:warning:db] written before the kill"
    assert all_events_of(session.id) == ["written before the kill", f"Session #{session.id} (tier 1) failed: "
                                         "the Claude CLI was killed by signal 9"]
    assert activity_kinds(session.id) == ["text", "marker"]
    # The child it left holding stdout is ended with the rest of its group.
    assert_group_ends(seen["pgid"])


def test_grandchild_holding_stdout_does_not_hang_the_session(
        app, fake_cli, run_session_now, cli_pid_file, orphan_pid_file):
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] up")) + [{"orphan": 60}] + sl.steps(sl.result("up")))
    started = time.monotonic()
    session = run_session_now()
    assert time.monotonic() - started < 12
    assert session.status == "completed", session.status_reason
    assert events_of(session.id) == ["up"]
    _, pgid = read_pid_and_group(cli_pid_file)
    assert_group_ends(pgid, within=1)   # already gone when the session ends


def test_hang_past_the_timeout_ends_the_whole_process_group(
        app, fake_cli, run_session_now, cli_pid_file, orphan_pid_file):
    app.config["CLAUDEOPS_SESSION_TIMEOUT"] = 1
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:nas] before the hang")) + [{"orphan": 60}, {"sleep": 60}])
    started = time.monotonic()
    session = run_session_now()
    assert time.monotonic() - started < 12
    assert session.status == "timed_out"
    assert session.status_reason == "exceeded the session timeout of 1 s"
    assert events_of(session.id) == ["before the hang"]
    _, pgid = read_pid_and_group(cli_pid_file)
    assert_group_ends(pgid, within=1)


def test_invalid_utf8_is_skipped_or_replaced_and_the_session_goes_on(app, fake_cli, run_session_now, caplog):
    broken = json.dumps(sl.text("[EVENT:critical:nas] never parsed")).replace("never", "\udcffnever")
    fake_cli(sl.steps(sl.init()) + [
        {"raw": broken},                                      # raw bytes that are not UTF-8
        {"line": sl.text("cut inside an emoji \ud83d [EVENT:warning:nas] Disk 91% full")},   # \ud83d, escaped
        {"line": sl.text("a whole one \U0001F600 [EVENT:info:nas] Scrub done")},
    ] + sl.steps(sl.result("done")))
    session = run_session_now()
    assert session.status == "completed", session.status_reason
    # The escaped half of a surrogate pair cannot be stored as is: it becomes U+FFFD, the marker counts.
    assert events_of(session.id) == ["Disk 91% full", "Scrub done"]
    assert "cut inside an emoji \ufffd [EVENT" in session.response and "\U0001F600" in session.response
    warning = db.session.scalar(select(SessionActivity.body).where(SessionActivity.kind == "warning"))
    assert warning.startswith("not UTF-8 at byte ")
    assert "skipped stream line 2: not UTF-8" in caplog.text
    # The run log keeps the bytes exactly as they came.
    assert b"\xffnever parsed" in Path(session.log_path).read_bytes()


def test_an_assistant_line_of_the_wrong_shape_is_noted_and_the_session_goes_on(app, fake_cli, run_session_now,
                                                                                 caplog):
    odd = sl.text("[EVENT:critical:nas] never read")
    odd["message"]["content"] = "[EVENT:critical:nas] never read"   # a string, not a list of blocks
    fake_cli(sl.steps(sl.init(), odd, sl.text("[EVENT:info:nas] Scrub done"), sl.result("done")))
    session = run_session_now()
    assert session.status == "completed", session.status_reason
    assert events_of(session.id) == ["Scrub done"]
    (warning,) = db.session.execute(select(SessionActivity.title, SessionActivity.body).where(
        SessionActivity.session_id == session.id, SessionActivity.kind == "warning")).all()
    assert warning == ("line 2", "an assistant line whose message content is a string, not a list of blocks, "
                                 "not read")
    assert f"session {session.id}: stream line 2: an assistant line whose message content is a string" in caplog.text


def test_a_tool_input_nested_too_deeply_to_show_is_noted_and_the_session_goes_on(app, fake_cli, run_session_now):
    # 1,000 levels: orjson reads up to 1,024, but writes 255 at most, and json.dumps gives up too.
    deep = json.dumps(sl.tool_use("x")).replace('{"command": "x", "description": "run it"}',
                                               '{"args": ' + "[" * 1000 + "]" * 1000 + "}")
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:nas] before")) + [{"raw": deep}]
             + sl.steps(sl.tool_result("ok"), sl.text("[EVENT:info:nas] after"), sl.result("done")))
    session = run_session_now()
    assert session.status == "completed", session.status_reason
    assert events_of(session.id) == ["before", "after"]
    body = db.session.scalar(select(SessionActivity.body).where(SessionActivity.session_id == session.id,
                                                               SessionActivity.kind == "tool_use"))
    assert body == "(nested too deeply to show here; the run log has it)"


def test_a_result_line_over_the_limit_is_said_to_be_skipped_in_the_failure(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:a] before")) + [{"big_line": 9 * 1024 * 1024}])
    session = run_session_now()
    assert session.status == "failed"
    assert session.status_reason == ("the Claude CLI ended without a result line it read (1 line(s) over "
                                     "CLAUDEOPS_MAX_LINE_BYTES were skipped)")


def test_fifty_megabyte_line_is_skipped_kept_in_the_run_log_and_never_held_whole(app, fake_cli, run_session_now,
                                                                                 caplog):
    size = 50 * 1024 * 1024
    limit = app.config["CLAUDEOPS_MAX_LINE_BYTES"]
    assert limit == 8 * 1024 * 1024   # the default
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:a] before")) + [{"big_line": size}]
             + sl.steps(sl.text("[EVENT:info:a] after"), sl.result()))
    tracemalloc.start()
    try:
        session = run_session_now()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert session.status == "completed", session.status_reason
    assert events_of(session.id) == ["before", "after"]
    warning = db.session.scalar(select(SessionActivity.body).where(SessionActivity.kind == "warning"))
    assert warning == f"{size} bytes, over CLAUDEOPS_MAX_LINE_BYTES; kept in the run log only"
    assert f"skipped stream line 3 of {size} bytes (over the line limit)" in caplog.text
    assert os.path.getsize(session.log_path) > size
    print(f"peak Python allocation while a {size / 2**20:.0f} MiB line went by: {peak / 2**20:.1f} MiB")
    # At most one line's worth of the limit is buffered, plus the run log's
    # redaction window (held as bytes and as decoded text), never the 50 MB line.
    from app.sessions.runlog import HOLD_CHARS
    assert peak < limit * 1.5 + 4 * HOLD_CHARS, f"peak {peak / 2**20:.1f} MiB while a 50 MiB line went by"


def test_no_result_line_fails_and_keeps_what_arrived(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:dns] resolver answers"), sl.tool_use("dig example.org"))
             + [{"stderr": "connection reset"}, {"exit": 0}])
    session = run_session_now()
    assert session.status == "failed"
    assert session.status_reason == "the Claude CLI ended without a result line: connection reset"
    assert session.exit_code == 0
    assert events_of(session.id) == ["resolver answers"]
    assert activity_kinds(session.id) == ["text", "marker", "tool_use"]


# --- the scheduler process -----------------------------------------------------------

@pytest.fixture
def scheduler_process(app, tmp_path):
    """`claudeops scheduler` on the test app's state directory, with the fake
    CLI; ``script`` rewrites the fake's script for the next session."""
    script = tmp_path / "process-script.json"
    env = {"CLAUDEOPS_STATE_DIR": app.config["CLAUDEOPS_STATE_DIR"],
           "CLAUDEOPS_DATABASE_URL": database_url(app.config["CLAUDEOPS_STATE_DIR"]),
           "CLAUDEOPS_RESULTS_DIR": "", "CLAUDEOPS_WORKDIR": "", "CLAUDEOPS_INTERVAL": "0",
           "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE), "CLAUDEOPS_SECRET_KEY": "test-secret",
           "FAKE_CLAUDE_SCRIPT": str(script), "FAKE_CLAUDE_PID": str(tmp_path / "cli.pid"),
           "FAKE_CLAUDE_ORPHAN_PID": str(tmp_path / "orphan.pid")}
    started = []

    def start() -> SchedulerProcess:
        process = SchedulerProcess(env, tmp_path / "scheduler.log").start()
        started.append(process)
        process.wait_started()
        return process
    start.script = lambda steps: script.write_text(json.dumps(steps))
    start.cli_pid_file = tmp_path / "cli.pid"
    start.orphan_pid_file = tmp_path / "orphan.pid"
    yield start
    for process in started:
        if process.process.poll() is None:
            process.kill()


def session_status(session_id: int) -> Session:
    db.session.remove()
    return db.session.get(Session, session_id)


@pytest.mark.slow
def test_scheduler_killed_mid_session_ends_the_cli_group_and_recovers_on_restart(app, scheduler_process):
    scheduler_process.script(sl.steps(sl.init()) + [{"orphan": 120}] + marker_steps(200, 0.2)
                             + sl.steps(sl.result()))
    first = scheduler_process()
    killed_id = control.enqueue(trigger="api").id
    _, pgid = read_pid_and_group(scheduler_process.cli_pid_file)
    wait_for(lambda: len(events_of(killed_id)) >= 5, what="five markers recorded")
    written_before = events_of(killed_id)
    assert control.scheduler_running()
    first.kill()
    # A dashboard on this host sees at once that it has ended, not a minute
    # later when its last heartbeat goes stale.
    db.session.remove()
    state = db.session.get(SchedulerState, 1)
    assert state.pid == first.process.pid and utcnow() - state.heartbeat_at < control.SCHEDULER_STALE
    assert not control.scheduler_alive(state) and control.scheduler_ended(state)

    # Nothing the session started keeps running unsupervised: the group leader
    # notices its runner is gone and ends the group.
    assert_group_ends(pgid, within=15)
    # Every marker written before the kill is still there.
    after_kill = events_of(killed_id)
    assert after_kill[:len(written_before)] == written_before
    assert after_kill == [f"marker {n}" for n in range(1, len(after_kill) + 1)]
    assert session_status(killed_id).status == "running"   # until a scheduler starts again

    scheduler_process.script(sl.steps(sl.init(), sl.text("[EVENT:info:web] after the restart"), sl.result()))
    second = scheduler_process()
    interrupted = session_status(killed_id)
    assert interrupted.status == "interrupted"
    assert interrupted.status_reason == "the service stopped while this session was running"
    assert events_of(killed_id) == after_kill
    next_id = control.enqueue(trigger="api").id
    wait_for(lambda: session_status(next_id).finished, timeout=20, what="the next session finished")
    assert session_status(next_id).status == "completed", session_status(next_id).status_reason
    assert events_of(next_id) == ["after the restart"]
    assert second.terminate() == 0
    if not on_postgres():   # the SQLite file checks itself; a server keeps its own pages whole
        assert integrity(db_path(app)) == "ok"


@pytest.mark.slow
def test_a_scheduler_started_at_once_after_a_kill_waits_for_the_cli_it_left_ending(app, scheduler_process):
    """The killed runner's CLI ignores SIGTERM: its guard kills it only after
    its grace. The next session must not run beside it."""
    scheduler_process.script(sl.steps(sl.init(), sl.text("[EVENT:info:web] stuck")) + [{"ignore_sigterm": True},
                                                                                      {"sleep": 120}])
    first = scheduler_process()
    killed_id = control.enqueue(trigger="api").id
    next_id = control.enqueue(trigger="api").id
    _, pgid = read_pid_and_group(scheduler_process.cli_pid_file)
    wait_for(lambda: events_of(killed_id), what="the marker recorded")
    scheduler_process.cli_pid_file.unlink()
    scheduler_process.script(sl.steps(sl.init(), sl.text("[EVENT:info:web] next"), sl.result()))
    first.kill()
    second = scheduler_process()   # at once
    deadline = time.monotonic() + 30
    while group_alive(pgid):
        assert not scheduler_process.cli_pid_file.exists(), "the next session's CLI started beside the old one"
        assert time.monotonic() < deadline, "the old group never ended"
        time.sleep(0.05)
    wait_for(lambda: session_status(next_id).finished, timeout=30, what="the next session finished")
    assert session_status(next_id).status == "completed", session_status(next_id).status_reason
    assert session_status(killed_id).status == "interrupted"
    assert "of a session whose runner died to end before running anything" in second.log()
    assert second.terminate() == 0


@pytest.mark.slow
def test_serve_killed_mid_session_leaves_no_web_server_behind_and_starts_again_on_its_port(tmp_path):
    script, cli_pid = tmp_path / "script.json", tmp_path / "cli.pid"
    script.write_text(json.dumps(sl.steps(sl.init()) + [{"orphan": 120}] + marker_steps(200, 0.2)))
    env = {"CLAUDEOPS_INTERVAL": "0", "CLAUDEOPS_CLAUDE_BIN": str(FAKE_CLAUDE), "FAKE_CLAUDE_SCRIPT": str(script),
           "FAKE_CLAUDE_PID": str(cli_pid), "FAKE_CLAUDE_ORPHAN_PID": str(tmp_path / "orphan.pid")}
    first = Service(tmp_path / "state", env, workers=2).start()
    try:
        status, body = first.post("/api/v1/sessions/trigger", {})
        session_id = body["id"]
        _, cli_group = read_pid_and_group(cli_pid)
        wait_for(lambda: first.get(f"/api/v1/sessions/{session_id}")[1]["status"] == "running")
        time.sleep(1.0)
        first.process.send_signal(signal.SIGKILL)   # serve alone: gunicorn and the CLI are left to notice
        first.process.wait(10)
        assert_group_ends(first.process.pid, within=30)   # the gunicorn master and its workers
        assert_group_ends(cli_group, within=15)
    finally:
        if first.group_alive():
            os.killpg(first.process.pid, signal.SIGKILL)

    second = Service(tmp_path / "state", env, workers=1)
    second.port, second.base_url = first.port, first.base_url   # the port is free again
    second.start()
    try:
        session = second.get(f"/api/v1/sessions/{session_id}")[1]
        assert session["status"] == "interrupted"
        assert second.get("/api/v1/events")[1]["total"] >= 1   # what it recorded before the kill
    finally:
        assert second.terminate() == 0


@pytest.mark.slow
@pytest.mark.parametrize("cli_signalled_too, cli_traps", [(False, False), (True, False), (True, True)],
                         ids=["service", "service-and-cli-group", "service-and-cli-group-exiting-143"])
def test_sigterm_during_a_session_records_it_stopped_and_ends_the_cli_group(app, scheduler_process,
                                                                             cli_signalled_too, cli_traps):
    """An init system may signal only the service, or every process it
    started (systemd's KillMode=control-group): then the CLI ends of the
    signal (dies of it, or exits 143 as the real one does) a moment before
    the service has said it is stopping."""
    scheduler_process.script(([{"trap_signals": True}] if cli_traps else [])
                             + sl.steps(sl.init(), sl.text("[EVENT:info:web] before SIGTERM"))
                             + [{"orphan": 120}, {"sleep": 120}])
    process = scheduler_process()
    session_id = control.enqueue(trigger="api").id
    _, pgid = read_pid_and_group(scheduler_process.cli_pid_file)
    read_pid(scheduler_process.orphan_pid_file)
    wait_for(lambda: events_of(session_id), what="the marker recorded")
    started = time.monotonic()
    if cli_signalled_too:
        os.killpg(pgid, signal.SIGTERM)
    assert process.terminate() == 0
    assert time.monotonic() - started < 15
    assert_group_ends(pgid, within=1)
    session = session_status(session_id)
    assert session.status == "stopped"
    assert session.status_reason == "the service shut down during the session"
    assert events_of(session_id) == ["before SIGTERM"]
    assert "Traceback" not in process.log()


# --- the database ------------------------------------------------------------------

def hold_database(path: Path, mode: str, start_when, until, report: dict) -> threading.Thread:
    """Another connection: a reader in a long transaction, or a writer holding
    the write lock (BEGIN IMMEDIATE), from ``start_when()`` until ``until()``."""
    def hold():
        wait_for(start_when, timeout=30, what="the session under way")
        with connect(path) as connection:
            if mode == "writer":
                connection.execute("BEGIN IMMEDIATE")
            else:
                connection.execute("BEGIN")
                report["count_at_start"] = connection.execute("SELECT count(*) FROM events").fetchone()[0]
            report["held_from"] = time.monotonic()
            report["released_by_end"] = until()
            if mode == "reader":   # still the same snapshot, however much was written meanwhile
                report["count_at_end"] = connection.execute("SELECT count(*) FROM events").fetchone()[0]
            connection.execute("COMMIT")
            report["held_until"] = time.monotonic()
    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def count_events(path: Path) -> int:
    with connect(path) as connection:
        return connection.execute("SELECT count(*) FROM events").fetchone()[0]


@sqlite_only("a second connection to the SQLite file; PostgreSQL readers and writers never block each other")
def test_a_long_reader_does_not_hold_up_the_session(app, fake_cli, run_session_now, caplog):
    # A pause after the first two: they are committed, and the reader holds
    # its snapshot, before the rest arrive, however slow a shared machine is.
    markers = marker_steps(20, 0.05)   # each a line and a pause
    fake_cli(sl.steps(sl.init()) + markers[:4] + [{"sleep": 3.0}] + markers[4:] + sl.steps(sl.result()))
    session_done = threading.Event()
    report = {}
    holder = hold_database(db_path(app), "reader", lambda: count_events(db_path(app)) >= 2,
                           lambda: session_done.wait(30), report)
    session = run_session_now()
    session_done.set()
    holder.join(10)
    assert session.status == "completed", session.status_reason
    assert len(events_of(session.id)) == 20
    # The session finished while the reader still held its snapshot: WAL readers never block the writer.
    assert report["released_by_end"] is True
    assert report["count_at_end"] == report["count_at_start"] < 20
    assert "database is locked" not in caplog.text


@sqlite_only("SQLite's one-writer lock, taken by a second connection to its file")
def test_a_writer_holding_the_lock_for_a_while_delays_the_session_and_loses_nothing(app, fake_cli, run_session_now,
                                                                                    caplog):
    fake_cli(sl.steps(sl.init()) + marker_steps(20, 0.05) + sl.steps(sl.result()))
    report = {}
    holder = hold_database(db_path(app), "writer", lambda: count_events(db_path(app)) >= 2,
                           lambda: time.sleep(2.0), report)
    session = run_session_now()
    finished = time.monotonic()
    holder.join(10)
    assert session.status == "completed", session.status_reason
    assert events_of(session.id) == [f"marker {n}" for n in range(1, 21)]
    # The session's last batch waited for the writer to let go (rows are
    # committed in batches, so the wait shows in when it finished, not in the
    # markers' own timestamps).
    assert report["held_until"] - report["held_from"] >= 1.9
    assert finished >= report["held_until"], "the session finished while the writer still held the lock"
    assert "database is locked" not in caplog.text


@sqlite_only("SQLite's busy timeout")
def test_a_lock_held_past_the_busy_timeout_fails_the_session_clearly_and_the_next_one_runs(
        tmp_path, monkeypatch, fake_cli, cli_pid_file, caplog):
    monkeypatch.setattr(extensions, "SQLITE_BUSY_TIMEOUT_MS", 500)
    app = make_app(tmp_path, CLAUDEOPS_INTERVAL=0)
    path = db_path(app)
    fake_cli(sl.steps(sl.init()) + marker_steps(40, 0.1) + sl.steps(sl.result()))
    with app.app_context():
        scheduler = SessionScheduler(app)
        scheduler.start()
        try:
            session_id = control.enqueue(trigger="api").id
            report = {}
            holder = hold_database(path, "writer", lambda: count_events(path) >= 3, lambda: time.sleep(3.0), report)
            wait_for(lambda: session_status(session_id).finished, timeout=30, what="the session recorded as ended")
            holder.join(10)
            session = session_status(session_id)
            assert session.status == "failed"
            assert "the database is locked: another connection held it for longer than the busy timeout of 0.5 s" \
                in session.status_reason
            _, pgid = read_pid_and_group(cli_pid_file)
            assert_group_ends(pgid, within=1)
            # What was committed before the lock is kept, in order, whole.
            kept = events_of(session_id)
            assert 3 <= len(kept) < 40 and kept == [f"marker {n}" for n in range(1, len(kept) + 1)]
            assert "database is locked" in caplog.text

            fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] after the lock"), sl.result()))
            next_id = control.enqueue(trigger="api").id
            wait_for(lambda: session_status(next_id).finished, timeout=20, what="the next session finished")
            assert session_status(next_id).status == "completed"
            assert events_of(next_id) == ["after the lock"]
        finally:
            scheduler.shutdown()
            db.session.remove()
    assert integrity(path) == "ok"


@sqlite_only("SQLite's busy timeout")
def test_a_write_refused_by_a_locked_database_answers_503_to_retry_and_writes_nothing(tmp_path, monkeypatch,
                                                                                      caplog):
    monkeypatch.setattr(extensions, "SQLITE_BUSY_TIMEOUT_MS", 200)
    app = make_app(tmp_path)
    client = app.test_client()
    memory = {"category": "timing", "service": "web", "observation": "restarts take 40 s", "confidence": "0.7"}
    with connect(db_path(app)) as holder:
        holder.execute("BEGIN IMMEDIATE")   # the write lock, held past the busy timeout
        api = client.post("/api/v1/memories", json=memory | {"confidence": 0.7})
        page = client.post("/memories", data=memory)
        htmx = client.post("/memories", data=memory, headers={"HX-Request": "true"})
        holder.execute("ROLLBACK")
    for response in (api, page, htmx):
        assert response.status_code == 503
        assert response.headers["Retry-After"] == "5"
    assert api.get_json() == {"error": DATABASE_UNAVAILABLE}
    assert "Database unavailable" in page.get_data(as_text=True)
    assert DATABASE_UNAVAILABLE in page.get_data(as_text=True)
    assert htmx.mimetype == "text/plain" and htmx.get_data(as_text=True) == DATABASE_UNAVAILABLE
    # One line each in the log, saying what is wrong; no traceback.
    refused = [r for r in caplog.records if "answered 503" in r.getMessage()]
    assert [r.getMessage().split(" answered")[0] for r in refused] == ["POST /api/v1/memories", "POST /memories",
                                                                       "POST /memories"]
    assert all("the database is locked" in r.getMessage() and r.exc_info is None for r in refused)
    assert "Traceback" not in caplog.text
    # Nothing was half-written, and once the lock is gone the same request goes through.
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Memory)) == 0
    assert client.post("/memories", data=memory, headers={"HX-Request": "true"}).status_code == 200
    with app.app_context():
        assert db.session.scalars(select(Memory.observation)).all() == ["restarts take 40 s"]


def test_a_database_server_that_does_not_answer_is_a_503_that_does_not_name_it(tmp_path, caplog):
    from tests.support.service import free_port
    port = free_port()   # nothing listens there
    app = create_app({"TESTING": True, "CLAUDEOPS_STATE_DIR": str(tmp_path / "state"), "CLAUDEOPS_RESULTS_DIR": "",
                      "CLAUDEOPS_WORKDIR": "", "CLAUDEOPS_SECRET_KEY": "test-secret",
                      "CLAUDEOPS_DATABASE_URL": f"postgresql+psycopg://ops:hunter2@127.0.0.1:{port}/claudeops"})
    client = app.test_client()
    for path, kind in (("/memories", "text/html"), ("/events", "text/html"), ("/api/v1/memories", "application/json")):
        response = client.get(path)
        assert response.status_code == 503, path
        assert response.mimetype == kind and response.headers["Retry-After"] == "5"
        body = response.get_data(as_text=True)
        assert DATABASE_UNAVAILABLE in body and str(port) not in body and "hunter2" not in body
    # The log says what is wrong, once a request, and keeps the password out.
    lines = [r.getMessage() for r in caplog.records if "answered 503" in r.getMessage()]
    assert len(lines) == 3 and all("the database is unavailable" in line and "Connection refused" in line
                                   for line in lines), lines
    assert "hunter2" not in caplog.text and "Traceback" not in caplog.text


class DatabaseFaultPlugin:
    """Meets the database's faults inside the marker hook, as a plugin that
    queries before it writes (the memory plugin does) would."""

    @hookimpl
    def claudeops_markers(self, text, run):
        if "query bug" in text:
            raise OperationalError("SELECT * FROM nowhere", {}, sqlite3.OperationalError("no such table: nowhere"))
        if "while locked" in text:
            raise OperationalError("INSERT INTO x", {}, sqlite3.OperationalError("database is locked"))
        return None


def test_a_plugin_meeting_a_locked_database_ends_the_session_instead_of_dropping_its_record(
        tmp_path, fake_cli, caplog):
    app = make_app(tmp_path, plugins=[DatabaseFaultPlugin()])
    with app.app_context():
        # A plugin's own mistake costs only its record: the session goes on.
        fake_cli(sl.steps(sl.init(), sl.text("query bug [EVENT:info:a] still recorded"), sl.result()))
        first = run_session(control.claim(control.enqueue().id))
        assert first.status == "completed", first.status_reason
        assert events_of(first.id) == ["still recorded"]
        assert "failed in claudeops_markers" in caplog.text
        # A database that takes no writes is not the plugin's fault: the session says so.
        # Rows are committed in batches at least every half second: "first" is
        # committed before the lock; the batch the lock refused is lost whole.
        fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:a] first")) + [{"sleep": 1.0}]
                 + sl.steps(sl.text("while locked"), sl.text("[EVENT:info:a] never reached"), sl.result()))
        second = run_session(control.claim(control.enqueue().id))
        assert second.status == "failed"
        assert second.status_reason.startswith(
            "the session was ended because the database refused a write: the database is locked")
        assert events_of(second.id) == ["first"]
        db.session.remove()


class SlowlyLockedPlugin:
    """Meets a database locked for a while (the busy timeout waited out)
    in the marker hook, as a plugin's write would."""

    @hookimpl
    def claudeops_markers(self, text, run):
        if "while locked" in text:
            time.sleep(1.0)
            raise OperationalError("INSERT INTO x", {}, sqlite3.OperationalError("database is locked"))
        return None


def test_a_session_a_refused_write_ended_says_when_its_run_log_failed_too(tmp_path, fake_cli, monkeypatch):
    """A full disk holding both: the run log cannot be finished either, and
    the session's reason does not claim that it keeps the CLI's output."""
    from app.sessions import runner
    really_close = runner._close

    def full_disk_close(run_log, log_path, outcome):
        really_close(run_log, log_path, outcome)
        outcome.log_error = f"the run log {log_path} could not be written: No space left on device"
    monkeypatch.setattr(runner, "_close", full_disk_close)
    app = make_app(tmp_path, plugins=[SlowlyLockedPlugin()])
    fake_cli(sl.steps(sl.init(), sl.text("while locked"), sl.result()))
    with app.app_context():
        session = run_session(control.claim(control.enqueue().id))
        assert session.status == "failed"
        assert "the database refused a write" in session.status_reason
        assert session.status_reason.endswith("; its run log could not be written either: the run log "
                                              f"{session.log_path} could not be written: No space left on device")


def test_what_the_cli_wrote_while_a_locked_database_ended_its_session_is_in_the_run_log(tmp_path, fake_cli):
    """The line that met the lock is the last one handed on; what the CLI
    wrote meanwhile and after, up to the end of its group, sits in the pipe:
    it is read into the run log before the session ends, and its stderr kept."""
    app = make_app(tmp_path, plugins=[SlowlyLockedPlugin()])
    later = [sl.text(f"[EVENT:info:a] written during the wait {n}") for n in range(20)]
    fake_cli(sl.steps(sl.init(), sl.text("while locked")) + [{"sleep": 0.3}, {"stderr": "the CLI's own complaint"}]
             + sl.steps(*later) + [{"sleep": 30}] + sl.steps(sl.result()))
    with app.app_context():
        started = time.monotonic()
        session = run_session(control.claim(control.enqueue().id))
        assert time.monotonic() - started < 20   # its group ended, not waited for
        assert session.status == "failed" and "the run log keeps the CLI's output" in session.status_reason
        run_log = Path(session.log_path).read_text()
        assert all(f"written during the wait {n}" in run_log for n in range(20))
        assert "the CLI's own complaint" in Path(session.log_path).with_suffix(".stderr.log").read_text()
        db.session.remove()


class ServerGoneAway(Exception):
    """What a database driver raises when its server went away (psycopg's
    OperationalError for a restarted PostgreSQL, say)."""


def server_gone_away() -> OperationalError:
    return OperationalError("SELECT id FROM memories", {}, ServerGoneAway("server closed the connection unexpectedly"),
                            connection_invalidated=True)


class ServerGoingAwayPlugin:
    """Meets a database server that went away in the marker hook, as a
    plugin's query would: for the first ``times`` text blocks that say so."""

    def __init__(self, times: int):
        self.times = times

    @hookimpl
    def claudeops_markers(self, text, run):
        if "the server goes away" in text and self.times > 0:
            self.times -= 1
            raise server_gone_away()
        return None


def session_going_through_an_outage() -> list[dict]:
    """A first batch committed before the outage (the commit interval
    passes), then a batch of every marker kind that meets it."""
    return (sl.steps(sl.init(), sl.text("[EVENT:info:web] before")) + [{"sleep": 0.8}]
            + sl.steps(sl.text("[EVENT:info:web] one\n[MEMORY:timing:web] restarts take 40 s"),
                       sl.text("[COOLDOWN:restart:web] success — restarted after its health check failed"),
                       sl.tool_use("systemctl status web"), sl.tool_result("active (running)"),
                       sl.text("the server goes away [EVENT:warning:web] two"), sl.text("[EVENT:info:web] three"),
                       sl.result()))


def test_a_database_server_gone_away_for_a_moment_costs_the_session_nothing(tmp_path, fake_cli, caplog):
    app = make_app(tmp_path, plugins=[ServerGoingAwayPlugin(times=2)])
    fake_cli(session_going_through_an_outage())
    with app.app_context():
        session = run_session(control.claim(control.enqueue().id))
        assert session.status == "completed", session.status_reason
        # The batch the outage took was read again, twice, and written once: every record once, in order.
        # (The new memory's notice is an event too, written with the memory, at the batch's end.)
        assert events_of(session.id) == ["before", "one", "two", "New memory #1 [timing:web]: restarts take 40 s",
                                         "three"]
        assert db.session.scalars(select(Memory.observation)).all() == ["restarts take 40 s"]
        assert db.session.scalar(select(func.count()).select_from(CooldownAction)) == 1
        assert activity_kinds(session.id) == ["text", "marker", "text", "marker", "marker", "text", "marker",
                                              "tool_use", "tool_result", "text", "marker", "text", "marker"]
        assert session.response == "\n\n".join([
            "[EVENT:info:web] before", "[EVENT:info:web] one\n[MEMORY:timing:web] restarts take 40 s",
            "[COOLDOWN:restart:web] success — restarted after its health check failed",
            "the server goes away [EVENT:warning:web] two", "[EVENT:info:web] three"])
        db.session.remove()
    gone = [r.getMessage() for r in caplog.records if "are read again" in r.getMessage()]
    assert len(gone) == 2 and all("server closed the connection unexpectedly" in line for line in gone), gone
    assert "the database is back" in caplog.text


class ServerGoneAtTheCommit:
    """The connection lost as the batch holding "three" is committed: with
    ``committed``, just after the server carried out the COMMIT (the batch
    is stored, yet the driver reports that the commit failed); without it,
    before (its rows were written in the transaction, which the server
    took with it)."""

    armed = sprung = False

    def __init__(self, committed: bool):
        self.committed = committed

    @hookimpl
    def claudeops_markers(self, text, run):
        if "] three" in text:
            self.armed = True
        return None

    def wrap(self, do_commit):
        def commit_failing_once(dbapi_connection):
            if self.committed:
                do_commit(dbapi_connection)
            if self.armed and not self.sprung:
                self.sprung = True
                raise server_gone_away()
            if not self.committed:
                do_commit(dbapi_connection)
        return commit_failing_once


def test_a_batch_the_server_committed_as_it_went_away_is_not_written_again(tmp_path, fake_cli, monkeypatch,
                                                                             caplog):
    trap = ServerGoneAtTheCommit(committed=True)
    app = make_app(tmp_path, plugins=[trap])
    fake_cli(session_going_through_an_outage())
    with app.app_context():
        monkeypatch.setattr(db.engine.dialect, "do_commit", trap.wrap(db.engine.dialect.do_commit))
        session = run_session(control.claim(control.enqueue().id))
        assert trap.sprung
        assert session.status == "completed", session.status_reason
        # Each once: "three" and the new memory's notice in the batch as it was first written.
        assert events_of(session.id) == ["before", "one", "two", "three",
                                         "New memory #1 [timing:web]: restarts take 40 s"]
        assert db.session.scalars(select(Memory.observation)).all() == ["restarts take 40 s"]
        assert len(activity_kinds(session.id)) == 13
        db.session.remove()
    assert "the database is back, and had committed the last batch" in caplog.text
    assert "are read again" in caplog.text


def test_a_batch_lost_at_its_commit_is_read_again_within_the_event_limit(tmp_path, fake_cli, monkeypatch):
    """The batch's events, written and then lost with the transaction, do
    not count towards the session's limit when the batch is read again:
    counted twice, they would leave no room for themselves."""
    trap = ServerGoneAtTheCommit(committed=False)
    app = make_app(tmp_path, plugins=[trap])
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] one"), sl.text("[EVENT:info:web] two"),
                      sl.text("[EVENT:info:web] three"), sl.result()))
    with app.app_context():
        change({"CLAUDEOPS_EVENTS_MAX_PER_SESSION": 3})
        monkeypatch.setattr(db.engine.dialect, "do_commit", trap.wrap(db.engine.dialect.do_commit))
        session = run_session(control.claim(control.enqueue().id))
        assert trap.sprung
        assert session.status == "completed", session.status_reason
        assert events_of(session.id) == ["one", "two", "three"]
        db.session.remove()


def test_a_database_server_gone_for_longer_than_a_session_waits_fails_it_clearly(tmp_path, fake_cli, cli_pid_file,
                                                                                  monkeypatch, caplog):
    monkeypatch.setattr(dbfaults, "OUTAGE_SECONDS", 1.2)   # one pause of 0.5 s, then not the next of 1 s
    app = make_app(tmp_path, plugins=[ServerGoingAwayPlugin(times=100)])
    fake_cli(session_going_through_an_outage())
    with app.app_context():
        started = time.monotonic()
        session = run_session(control.claim(control.enqueue().id))
        assert time.monotonic() - started < 10
        assert session.status == "failed"
        assert session.status_reason == (
            "the session was ended because the database refused a write: the database is unavailable (server "
            "closed the connection unexpectedly); the run log keeps the CLI's output")
        assert events_of(session.id) == ["before"]   # the batch before the outage, kept
        db.session.remove()
    _, pgid = read_pid_and_group(cli_pid_file)
    assert_group_ends(pgid, within=1)
    assert len([r for r in caplog.records if "are read again" in r.getMessage()]) == 1
    assert "the database did not come back within 1.2 s" in caplog.text


def test_a_service_stopping_while_a_session_waits_for_the_database_server_waits_no_longer(tmp_path, fake_cli,
                                                                                           cli_pid_file):
    app = make_app(tmp_path, plugins=[ServerGoingAwayPlugin(times=100)])
    fake_cli(session_going_through_an_outage())
    shutdown = threading.Event()
    stopping = threading.Timer(2.0, shutdown.set)   # while the session waits, a minute at most
    with app.app_context():
        started = time.monotonic()
        stopping.start()
        session = run_session(control.claim(control.enqueue().id), shutdown)
        assert time.monotonic() - started < 6
        assert session.status == "failed"
        assert "the database is unavailable (server closed the connection unexpectedly)" in session.status_reason
        assert events_of(session.id) == ["before"]
        db.session.remove()
    _, pgid = read_pid_and_group(cli_pid_file)
    assert_group_ends(pgid, within=1)


class RestartingPlugin:
    """Stops the PostgreSQL server under the session for ``down_for``
    seconds the first time a text block says so, between two of its own
    queries: the second meets the server gone, with the batch's transaction
    open, and the session's attempts to write the batch again meet it gone
    too until it is back."""

    def __init__(self, down_for: float):
        self.down_for = down_for
        self.outage: threading.Thread | None = None

    @hookimpl
    def claudeops_markers(self, text, run):
        if "restart the server" in text and self.outage is None:
            db.session.execute(select(func.count()).select_from(Event))
            self.outage = threading.Thread(target=restart_server, args=(self.down_for,))
            self.outage.start()
            wait_for(lambda: not server_answers(), timeout=30, what="the server stopped")
            db.session.execute(select(func.count()).select_from(Event))
        return None


@restarts_the_server
def test_a_postgresql_restart_mid_session_loses_nothing_and_the_session_goes_on(tmp_path, fake_cli, caplog):
    plugin = RestartingPlugin(down_for=2.0)
    app = make_app(tmp_path, plugins=[plugin])
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] before")) + [{"sleep": 0.8}]
             + sl.steps(sl.text("[EVENT:info:web] one\n[MEMORY:timing:web] restarts take 40 s"),
                        sl.text("restart the server [EVENT:warning:web] two"), sl.text("[EVENT:info:web] three"))
             + [{"sleep": 0.8}] + sl.steps(sl.text("[EVENT:info:web] after"), sl.result()))
    with app.app_context():
        started = time.monotonic()
        session = run_session(control.claim(control.enqueue().id))
        plugin.outage.join(30)
        assert session.status == "completed", session.status_reason
        assert time.monotonic() - started >= 2.0   # it did wait for the server
        assert [message for message in events_of(session.id) if not message.startswith("New memory")] == [
            "before", "one", "two", "three", "after"]
        assert db.session.scalars(select(Memory.observation)).all() == ["restarts take 40 s"]
        db.session.remove()
    waits = [r.getMessage() for r in caplog.records if "are read again" in r.getMessage()]
    # The first attempt, half a second on, still found no server.
    assert len(waits) >= 2 and "waiting 0.5 s for it" in waits[0] and "waiting 1 s for it" in waits[1], waits
    assert "the database is back" in caplog.text


@contextmanager
def before_each_flush(listener):
    """``listener`` called before each flush of the app's database session within the block."""
    sqlalchemy_event.listen(db.session, "before_flush", listener)
    try:
        yield
    finally:
        sqlalchemy_event.remove(db.session, "before_flush", listener)


class Outages:
    """Where a database server is met gone away, and how many more times at each place."""

    def __init__(self, times: int, places: tuple[str, ...]):
        self.left = dict.fromkeys(places, times)

    def _meets(self, place: str) -> bool:
        if self.left[place] > 0:
            self.left[place] -= 1
            return True
        return False


def given_up_in(outage: Outages, session_id: int) -> None:
    """The session run through ``outage``, which lasts until its wait gives up
    with the server's absence; what was left of the transaction rolled back."""
    with before_each_flush(outage.before_flush), pytest.raises(
            OperationalError, match="server closed the connection unexpectedly"):
        run_session(db.session.get(Session, session_id))
    dbfaults.roll_back()


class GoingAwayAtTheEnd(Outages):
    """Meets a database server gone away after the CLI has ended: as the
    session's end is committed, in a plugin's ``claudeops_session_finished``
    (after it wrote a row), and as the escalation it asks for is committed,
    each the first ``times`` times."""

    def __init__(self, times: int):
        super().__init__(times, ("end", "finished", "escalation"))

    def before_flush(self, orm_session, _context, _instances):
        for row in list(orm_session.dirty) + list(orm_session.new):
            if isinstance(row, Session) and row.status == "completed" and self._meets("end"):
                raise server_gone_away()
            if isinstance(row, Session) and row.trigger == "escalation" and self._meets("escalation"):
                raise server_gone_away()

    @hookimpl
    def claudeops_session_finished(self, run, result):
        db.session.add(Event(session_id=run.session_id, tier=run.tier, level="info", service=None,
                             message=f"finished: {result.status}"))
        db.session.flush()
        if self._meets("finished"):
            raise server_gone_away()

    @hookimpl
    def claudeops_escalation(self, run, result):
        return "the web tier still answers 502" if run.tier == 1 else None


def test_a_database_server_gone_away_as_a_session_ends_costs_it_nothing(tmp_path, fake_cli, caplog):
    """The CLI's work is done: its session is recorded completed, with its
    response and figures, every plugin told once and its escalation queued
    once, as if the server had never gone."""
    outage = GoingAwayAtTheEnd(times=2)
    app = make_app(tmp_path, plugins=[outage])
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] checked"), sl.result("checked", cost=0.25, turns=3)))
    with app.app_context():
        with before_each_flush(outage.before_flush):
            session = run_session(control.claim(control.enqueue().id))
        assert outage.left == {"end": 0, "finished": 0, "escalation": 0}
        assert session.status == "completed", session.status_reason
        assert (session.response, session.cost_usd, session.num_turns, session.exit_code) == (
            "[EVENT:info:web] checked", 0.25, 3, 0)
        children = db.session.scalars(select(Session).where(Session.parent_id == session.id)).all()
        assert [(child.tier, child.status, child.escalation_reason) for child in children] == [
            (2, "queued", "the web tier still answers 502")]
        assert events_of(session.id) == ["checked", "finished: completed",
                                         f"Session #{session.id} escalated to tier 2 (investigate) as session "
                                         f"#{children[0].id}: the web tier still answers 502"]
        db.session.remove()
    waits = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    for what in ("recording its end", "in claudeops_session_finished", "considering its escalation"):
        mine = [line for line in waits if what in line]
        assert len(mine) == 2 and "waiting 0.5 s for it" in mine[0] and "waiting 1 s for it" in mine[1], waits
        assert "server closed the connection unexpectedly" in mine[0]
    assert caplog.text.count("the database is back, and it is done") == 3


class GoneAsTheEscalationIsQueued(Outages):
    """Meets a database server gone away as the escalation is committed, once."""

    def __init__(self):
        super().__init__(1, ("escalation",))

    def before_flush(self, orm_session, _context, _instances):
        for row in list(orm_session.new):
            if isinstance(row, Session) and row.trigger == "escalation" and self._meets("escalation"):
                raise server_gone_away()


def test_an_escalate_marker_is_not_lost_to_a_database_server_gone_away_as_it_is_queued(tmp_path, fake_cli):
    """The built-in plugin hands its request over once: the host asks once
    and queues the child when the server is back."""
    outage = GoneAsTheEscalationIsQueued()
    app = make_app(tmp_path)
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the web tier answers 502"), sl.result("checked")))
    with app.app_context():
        with before_each_flush(outage.before_flush):
            session = run_session(control.claim(control.enqueue().id))
        assert outage.left == {"escalation": 0}
        assert session.status == "completed", session.status_reason
        children = db.session.scalars(select(Session).where(Session.parent_id == session.id)).all()
        assert [(child.tier, child.status, child.escalation_reason) for child in children] == [
            (2, "queued", "the web tier answers 502")]
        db.session.remove()


class LockedInItsEndHook:
    """A plugin whose ``claudeops_session_finished`` writes a row, then meets
    the database locked past its busy timeout (a storage fault)."""
    __name__ = "locked_at_the_end"

    @hookimpl
    def claudeops_session_finished(self, run, result):
        db.session.add(Event(session_id=run.session_id, tier=run.tier, level="info", service=None,
                             message="written before the lock"))
        db.session.flush()
        raise OperationalError("INSERT INTO events", {}, sqlite3.OperationalError("database is locked"))


def test_a_plugins_end_hook_the_database_refuses_costs_the_session_neither_its_end_nor_its_escalation(
        tmp_path, fake_cli, caplog):
    """The session's end is recorded before its plugins are told: their
    failure, the database's fault, is logged and their rows rolled back, and
    the escalation the agent asked for is queued all the same."""
    app = make_app(tmp_path, plugins=[LockedInItsEndHook()])
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the web tier answers 502"), sl.result("checked", cost=0.25)))
    with app.app_context():
        session_id = run_session(control.claim(control.enqueue().id)).id
        db.session.remove()
        session = db.session.get(Session, session_id)
        assert (session.status, session.status_reason, session.cost_usd) == ("completed", None, 0.25)
        children = db.session.scalars(select(Session).where(Session.parent_id == session_id)).all()
        assert [(child.tier, child.status, child.escalation_reason) for child in children] == [
            (2, "queued", "the web tier answers 502")]
        assert "written before the lock" not in all_events_of(session_id)
        assert all_events_of(session_id)[-1].startswith(f"Session #{session_id} escalated to tier 2")
    said = [r for r in caplog.records if "failed in claudeops_session_finished" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "ERROR" and not said[0].exc_info   # no traceback: not a bug
    assert said[0].getMessage().startswith(
        f"session {session_id}: plugin locked_at_the_end failed in claudeops_session_finished (the database is "
        "locked: another connection held it for longer than the busy timeout")
    assert said[0].getMessage().endswith(
        "its end stays as recorded, and the escalation it asked for is still decided")


def test_a_database_server_gone_for_longer_than_an_end_hook_waits_leaves_the_escalation_to_be_queued(
        tmp_path, fake_cli, monkeypatch, caplog):
    """The end hook's wait gives up; the escalation's own write waits for
    the server again, and is queued once it takes it."""
    monkeypatch.setattr(dbfaults, "OUTAGE_SECONDS", 1.2)   # one pause of 0.5 s, then not the next of 1 s
    outage = GoingAwayAtTheEnd(times=0)
    outage.left["finished"] = 100
    app = make_app(tmp_path, plugins=[outage])
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] checked"), sl.result("checked")))
    with app.app_context():
        session_id = run_session(control.claim(control.enqueue().id)).id
        db.session.remove()
        assert db.session.get(Session, session_id).status == "completed"
        child = db.session.scalar(select(Session).where(Session.parent_id == session_id))
        assert (child.tier, child.status, child.escalation_reason) == (2, "queued", "the web tier still answers 502")
        assert "finished: completed" not in all_events_of(session_id)
    assert "the database did not come back within 1.2 s" in caplog.text
    assert (f"session {session_id}: plugin {type(outage).__module__}.GoingAwayAtTheEnd failed in "
            "claudeops_session_finished (the database is unavailable") in caplog.text


def test_a_database_server_gone_for_longer_than_its_end_waits_leaves_the_session_to_the_scheduler(
        tmp_path, fake_cli, monkeypatch, caplog):
    monkeypatch.setattr(dbfaults, "OUTAGE_SECONDS", 1.2)   # one pause of 0.5 s, then not the next of 1 s
    outage = GoingAwayAtTheEnd(times=100)
    app = make_app(tmp_path, plugins=[outage])
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] checked"), sl.result("checked")))
    with app.app_context():
        session_id = control.enqueue().id
        instance = SessionScheduler(app)
        with before_each_flush(outage.before_flush), pytest.raises(
                OperationalError, match="server closed the connection unexpectedly"):
            instance._run_next()
        # Still running: the scheduler records it once the database takes it.
        assert db.session.get(Session, session_id).status == "running"
        assert all_events_of(session_id) == ["checked"]
        db.session.remove()
        outage.left = dict.fromkeys(outage.left, 0)   # the server is back
        instance._record_unfinished()
        session = db.session.get(Session, session_id)
        late = "its end could not be recorded then: the database is unavailable (server closed the connection unexpectedly)"
        assert (session.status, session.status_reason) == ("completed", late)
        # As for an end recorded at once: the plugins are told, and its escalation is queued.
        child = db.session.scalar(select(Session).where(Session.parent_id == session_id))
        assert (child.tier, child.status, child.escalation_reason) == (2, "queued", "the web tier still answers 502")
        assert all_events_of(session_id) == [
            "checked", f"Session #{session_id} (tier 1) completed: {session.status_reason}", "finished: completed",
            f"Session #{session_id} escalated to tier 2 (investigate) as session #{child.id}: the web tier still "
            "answers 502"]
        instance._record_unfinished()   # once only
        assert len(all_events_of(session_id)) == 4
        db.session.remove()
    assert f"session {session_id}: recording its end: the database did not come back within 1.2 s" in caplog.text
    assert f"session {session_id} recorded as completed: {late}" in caplog.text


class FullAsTheEscalationIsQueued:
    """A database that takes no new session while ``full``: the disk filled
    up just as the session's end was recorded (a storage fault, which no
    wait outlasts)."""

    def __init__(self):
        self.full = True

    def before_flush(self, orm_session, _context, _instances):
        if self.full and any(isinstance(row, Session) and row.trigger == "escalation" for row in orm_session.new):
            raise OperationalError("INSERT INTO sessions", {}, sqlite3.OperationalError("database or disk is full"))


def children_of(session_id: int) -> list[tuple]:
    db.session.remove()
    return [(child.tier, child.status, child.escalation_reason) for child in db.session.scalars(
        select(Session).where(Session.parent_id == session_id))]


def test_an_escalation_the_database_refuses_as_its_session_ends_is_queued_once_it_takes_writes(
        tmp_path, fake_cli, caplog):
    """Before, the agent's request was dropped with a worker failure in the
    log: the session's end was recorded, and nothing asked again."""
    full = FullAsTheEscalationIsQueued()
    app = make_app(tmp_path)
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the web tier answers 502"), sl.result("checked", cost=0.25)))
    with app.app_context():
        session_id = control.enqueue().id
        instance = SessionScheduler(app)
        with before_each_flush(full.before_flush):
            assert instance._run_next() is True   # the worker goes on to what is queued next
            with pytest.raises(OperationalError, match="database or disk is full"):
                instance._record_unfinished()   # still full: tried again on the worker's next round
        session = db.session.get(Session, session_id)
        assert (session.status, session.status_reason, session.cost_usd) == ("completed", None, 0.25)
        assert children_of(session_id) == []
        full.full = False   # space freed
        instance._record_unfinished()
        assert children_of(session_id) == [(2, "queued", "the web tier answers 502")]
        instance._record_unfinished()   # decided once: not queued twice
        assert children_of(session_id) == [(2, "queued", "the web tier answers 502")]
        assert all_events_of(session_id)[-1].startswith(f"Session #{session_id} escalated to tier 2 (investigate)")
    kept = [r for r in caplog.records if "could not be decided" in r.getMessage()]
    assert len(kept) == 1 and kept[0].levelname == "ERROR" and not kept[0].exc_info   # the disk's fault: no traceback
    assert kept[0].getMessage() == (
        f"session {session_id}: the escalation it asked for (the web tier answers 502) could not be decided (the "
        "disk holding the database is full (database or disk is full)); it is tried again until the database "
        "takes it")
    assert f"session {session_id}: the database takes writes again, and the escalation it asked for is decided" \
        in caplog.text
    assert "scheduler worker failed" not in caplog.text


def test_an_escalation_still_refused_as_the_scheduler_stops_is_said_to_be_lost(tmp_path, fake_cli, caplog):
    full = FullAsTheEscalationIsQueued()
    app = make_app(tmp_path)
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the web tier answers 502"), sl.result("checked")))
    with app.app_context():
        session_id = control.enqueue().id
        instance = SessionScheduler(app)
        with before_each_flush(full.before_flush):
            instance._run_next()
            instance._record_last_words()
        assert children_of(session_id) == []
    assert (f"session {session_id}: the escalation it asked for (the web tier answers 502) is not queued: the "
            "database refused it until the service stopped") in caplog.text


def test_an_escalation_queued_before_a_later_write_failed_is_not_queued_again(app):
    """A fault after the child was committed (its notice, the badge's
    correction) leaves it undecided as far as the scheduler knows: trying
    again must not run the same investigation twice."""
    parent = control.claim(control.enqueue().id)
    control.end_running(parent.id, None, utcnow(), "completed")
    control.enqueue(tier=2, trigger="escalation", parent_id=parent.id, escalation_reason="queued before")
    result = SessionResult(status="completed", reason=None, response="", cost_usd=None, num_turns=None,
                           duration_ms=None, is_error=False, cli_session_id=None)
    undecided = escalation.Undecided(parent.id, run_info(parent), result, "asked again")
    assert escalation.consider_again(undecided) is None
    assert children_of(parent.id) == [(2, "queued", "queued before")]
    # One deleted meanwhile (retention, an operator) is nothing to decide.
    assert escalation.consider_again(escalation.Undecided(10**6, run_info(parent), result, "gone")) is None


def test_a_session_the_database_refused_to_start_is_recorded_failed_with_a_notice(tmp_path, monkeypatch):
    """Its run raised before the plugins were told it began: they are not
    told it ended either, but the feed says it failed."""
    app = make_app(tmp_path, plugins=[finished := FinishedRecorder()])
    with app.app_context():
        session_id = control.enqueue().id
        refused = OperationalError("UPDATE sessions", {}, sqlite3.OperationalError("database or disk is full"))
        monkeypatch.setattr(manager_module, "tags_by_plugin", lambda: (_ for _ in ()).throw(refused))
        instance = SessionScheduler(app)
        with pytest.raises(OperationalError):
            instance._run_next()
        monkeypatch.undo()
        instance._record_unfinished()
        session = db.session.get(Session, session_id)
        assert (session.status, session.status_reason) == (
            "failed", f"the session could not be finished: {dbfaults.describe(refused)}")
        assert all_events_of(session_id) == [f"Session #{session_id} (tier 1) failed: {session.status_reason}"]
        assert finished.told == []


class FinishedRecorder:
    def __init__(self):
        self.told = []

    @hookimpl
    def claudeops_session_finished(self, run, result):
        self.told.append((run.session_id, result.status))


class GoneAsItStarts(FinishedRecorder):
    """Meets a database server gone for good in its ``claudeops_session_starting``."""

    @hookimpl
    def claudeops_session_starting(self, run):
        raise server_gone_away()


def test_a_session_whose_starting_hooks_met_the_database_gone_is_told_to_have_ended(tmp_path, monkeypatch):
    """Plugins the session's start was told to may keep something of it
    until they hear of its end: they hear of it once it is recorded."""
    monkeypatch.setattr(dbfaults, "OUTAGE_SECONDS", 0.6)   # one pause of 0.5 s, then not the next
    gone = GoneAsItStarts()
    app = make_app(tmp_path, plugins=[gone])
    with app.app_context():
        session_id = control.enqueue().id
        instance = SessionScheduler(app)
        with pytest.raises(OperationalError, match="server closed the connection unexpectedly"):
            instance._run_next()
        instance._record_unfinished()
        session = db.session.get(Session, session_id)
        assert session.status == "failed" and session.status_reason.startswith("the session could not be finished")
        assert gone.told == [(session_id, "failed")]
        assert all_events_of(session_id) == [f"Session #{session_id} (tier 1) failed: {session.status_reason}"]


class RestartAsWritten:
    """Stops the PostgreSQL server for ``down_for`` seconds just before the
    first flush that writes a session row ``writing`` picks out: the
    commit meets it gone."""

    def __init__(self, down_for: float, writing: Callable[[Session], bool]):
        self.down_for = down_for
        self.writing = writing
        self.outage: threading.Thread | None = None

    def before_flush(self, orm_session, _context, _instances):
        if self.outage is None and any(isinstance(row, Session) and self.writing(row) for row in orm_session.dirty):
            self.outage = threading.Thread(target=restart_server, args=(self.down_for,))
            self.outage.start()
            wait_for(lambda: not server_answers(), timeout=30, what="the server stopped")

    def run_a_session(self) -> Session:
        """A session run through the restart: completed, and to be read back from the server."""
        with before_each_flush(self.before_flush):
            session = run_session(control.claim(control.enqueue().id))
        self.outage.join(30)
        assert session.status == "completed", session.status_reason
        db.session.expire_all()   # read back from the server, not from what this session holds
        return session


@restarts_the_server
def test_a_postgresql_restart_as_a_session_ends_is_waited_for(tmp_path, fake_cli, caplog):
    restart = RestartAsWritten(down_for=2.0, writing=lambda row: row.status == "completed")
    app = make_app(tmp_path)
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] checked"), sl.result("checked", cost=0.25)))
    with app.app_context():
        session = restart.run_a_session()
        assert (session.status, session.response, session.cost_usd) == (
            "completed", "[EVENT:info:web] checked", 0.25)
        assert events_of(session.id) == ["checked"]
        db.session.remove()
    waits = [r.getMessage() for r in caplog.records if "recording its end" in r.getMessage()]
    assert "waiting 0.5 s for it" in waits[0], waits
    assert "the database is back, and it is done" in waits[-1], waits



def _being_set(row, column: str) -> bool:
    """Whether the flush about to happen writes a new value to ``row``'s ``column``."""
    return bool(sqlalchemy_inspect(row).attrs[column].history.added)


class GoingAwayAtTheStart(Outages):
    """Meets a database server gone away before the CLI starts: as the
    session's model and run log are committed, in a plugin's
    ``claudeops_prompt_context`` (after it wrote a row), and as the system
    prompt is committed, each the first ``times`` times."""

    SECTION = "The web tier sits behind a proxy."

    def __init__(self, times: int):
        super().__init__(times, ("start", "prompt context", "system prompt"))

    def before_flush(self, orm_session, _context, _instances):
        for row in orm_session.dirty:
            if isinstance(row, Session) and _being_set(row, "log_path") and self._meets("start"):
                raise server_gone_away()
            if isinstance(row, Session) and _being_set(row, "system_prompt") and self._meets("system prompt"):
                raise server_gone_away()

    @hookimpl
    def claudeops_prompt_context(self, run):
        db.session.add(Event(session_id=run.session_id, tier=run.tier, level="info", service=None,
                             message="prompt built"))
        db.session.flush()
        if self._meets("prompt context"):
            raise server_gone_away()
        return PromptSection(name="outage", text=self.SECTION, position=300)


def test_a_database_server_gone_away_as_a_session_starts_costs_it_nothing(tmp_path, fake_cli, caplog):
    """The session starts once the server is back, with its model, run log
    and whole system prompt recorded, and the plugin's row written once."""
    outage = GoingAwayAtTheStart(times=2)
    app = make_app(tmp_path, plugins=[outage])
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] checked"), sl.result("checked")))
    with app.app_context():
        with before_each_flush(outage.before_flush):
            session = run_session(control.claim(control.enqueue().id))
        assert outage.left == {"start": 0, "prompt context": 0, "system prompt": 0}
        assert session.status == "completed", session.status_reason
        assert session.model == app.config["CLAUDEOPS_TIER1_MODEL"]
        assert Path(session.log_path).is_file()
        assert session.system_prompt.count(GoingAwayAtTheStart.SECTION) == 1
        assert events_of(session.id) == ["prompt built", "checked"]
        db.session.remove()
    waits = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    for what in ("recording its start", "in claudeops_prompt_context", "recording its system prompt"):
        mine = [line for line in waits if what in line]
        assert len(mine) == 2 and "waiting 0.5 s for it" in mine[0] and "waiting 1 s for it" in mine[1], waits
    assert caplog.text.count("the database is back, and it is done") == 3


def test_a_database_server_gone_for_longer_than_a_session_start_waits_leaves_it_to_the_scheduler(
        tmp_path, fake_cli, cli_pid_file, monkeypatch, caplog):
    monkeypatch.setattr(dbfaults, "OUTAGE_SECONDS", 1.2)   # one pause of 0.5 s, then not the next of 1 s
    outage = GoingAwayAtTheStart(times=100)
    app = make_app(tmp_path, plugins=[outage])
    fake_cli(sl.steps(sl.init(), sl.result("checked")))
    with app.app_context():
        session_id = control.claim(control.enqueue().id).id
        given_up_in(outage, session_id)
        session = db.session.get(Session, session_id)
        # Still running, nothing of its start stored: the scheduler records it failed once the database takes it.
        assert (session.status, session.log_path, session.system_prompt) == ("running", None, None)
        db.session.remove()
    assert not cli_pid_file.exists()   # the CLI never started
    assert f"session {session_id}: recording its start: the database did not come back within 1.2 s" in caplog.text


@restarts_the_server
def test_a_postgresql_restart_as_a_session_starts_is_waited_for(tmp_path, fake_cli, caplog):
    restart = RestartAsWritten(down_for=2.0, writing=lambda row: _being_set(row, "system_prompt"))
    app = make_app(tmp_path)
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] checked"), sl.result("checked")))
    with app.app_context():
        session = restart.run_a_session()
        assert session.status == "completed" and "## Reporting events" in session.system_prompt
        assert events_of(session.id) == ["checked"]
        db.session.remove()
    waits = [r.getMessage() for r in caplog.records if "recording its system prompt" in r.getMessage()]
    assert "waiting 0.5 s for it" in waits[0], waits
    assert "the database is back, and it is done" in waits[-1], waits


# --- the disk ----------------------------------------------------------------------

@pytest.fixture
def mounts():
    """Mount points made by a test, unmounted after it."""
    made: list[Path] = []
    yield made
    for path in reversed(made):
        unmount(path)


def big_tool_results(count: int, size: int) -> list[dict]:
    return [{"line": sl.tool_result("x" * size, tool_id=f"toolu_fill_{n}")} for n in range(count)]


def test_a_full_disk_under_the_run_log_fails_the_session_clearly(tmp_path, fake_cli, cli_pid_file, mounts, caplog):
    results = tmp_path / "results"
    mount_tmpfs(results, "1m")
    mounts.append(results)
    app = make_app(tmp_path, CLAUDEOPS_RESULTS_DIR=str(results))
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] before the disk filled"))
             + big_tool_results(30, 100_000) + sl.steps(sl.text("[EVENT:info:web] never reached"), sl.result()))
    with app.app_context():
        session = run_session(control.claim(control.enqueue().id))
        assert session.status == "failed"
        assert session.status_reason.startswith(f"the session was ended because the run log {results}/session-")
        assert session.status_reason.endswith(" could not be written: No space left on device")
        assert events_of(session.id) == ["before the disk filled"]
        assert "No space left on device" in caplog.text
        db.session.remove()
    _, pgid = read_pid_and_group(cli_pid_file)
    assert_group_ends(pgid, within=1)
    if not on_postgres():   # the SQLite file checks itself; a server keeps its own pages whole
        assert integrity(db_path(app)) == "ok"


@sqlite_only("the SQLite file on a small tmpfs; a PostgreSQL server's disk is the server's")
def test_a_full_disk_under_the_database_fails_the_session_clearly_and_keeps_the_rows_whole(
        tmp_path, fake_cli, cli_pid_file, mounts, caplog):
    state = tmp_path / "state"
    mount_tmpfs(state, "8m")
    mounts.append(state)
    app = make_app(tmp_path, CLAUDEOPS_RESULTS_DIR=str(tmp_path / "results"), CLAUDEOPS_INTERVAL=0)
    path = db_path(app)
    filler = state / "filler"
    # Leave about 300 kB: the session's activity log fills it.
    free = os.statvfs(state).f_bavail * os.statvfs(state).f_frsize
    filler.write_bytes(b"\0" * (free - 300_000))
    # The first marker and the first few tool results are committed (batches
    # go at least every half second) before the rest of the output fills the disk.
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] before the disk filled")) + [{"sleep": 1.0}]
             + big_tool_results(3, 19_000) + [{"sleep": 1.0}] + big_tool_results(100, 19_000)
             + sl.steps(sl.text("[EVENT:info:web] never reached"), sl.result()))
    with app.app_context():
        scheduler = SessionScheduler(app)
        scheduler.start()
        try:
            session_id = control.enqueue(trigger="api").id
            wait_for(lambda: "database or disk is full" in caplog.text, timeout=30, what="the disk full")
            _, pgid = read_pid_and_group(cli_pid_file)
            assert_group_ends(pgid)
            filler.unlink()   # the operator makes room
            wait_for(lambda: session_status(session_id).finished, timeout=30, what="the session recorded as ended")
            session = session_status(session_id)
            assert session.status == "failed"
            assert "the disk holding the database is full (database or disk is full)" in session.status_reason
            assert events_of(session_id) == ["before the disk filled"]
            # No half rows: every tool result stored is whole.
            bodies = db.session.scalars(select(SessionActivity.body).where(
                SessionActivity.session_id == session_id, SessionActivity.kind == "tool_result")).all()
            assert bodies and all(body == "x" * 19_000 for body in bodies)

            fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] room again"), sl.result()))
            next_id = control.enqueue(trigger="api").id
            wait_for(lambda: session_status(next_id).finished, timeout=20, what="the next session finished")
            assert session_status(next_id).status == "completed"
        finally:
            scheduler.shutdown()
            db.session.remove()
    assert integrity(path) == "ok"


def test_a_read_only_results_directory_fails_the_session_before_the_cli_starts(
        tmp_path, fake_cli, cli_pid_file, mounts):
    results = tmp_path / "results"
    results.mkdir()
    bind_read_only(results)
    mounts.append(results)
    app = make_app(tmp_path, CLAUDEOPS_RESULTS_DIR=str(results))
    fake_cli(sl.steps(sl.init(), sl.result()))
    with app.app_context():
        session = run_session(control.claim(control.enqueue().id))
        assert session.status == "failed"
        assert session.status_reason.startswith(f"the session was ended because the run log {results}/session-")
        assert session.status_reason.endswith(" could not be written: Read-only file system")
        db.session.remove()
    assert not cli_pid_file.exists(), "the CLI ran without a run log"


@pytest.mark.slow
def test_a_read_only_state_directory_stops_the_scheduler_at_start_with_a_clear_error(tmp_path, mounts):
    state = tmp_path / "state"
    mount_tmpfs(state, "16m")
    mounts.append(state)
    app = make_app(tmp_path)
    with app.app_context():
        db.engine.dispose()   # nothing of ours open for writing, or the remount is refused
    subprocess.run(["mount", "-o", "remount,ro", str(state)], check=True)
    process = SchedulerProcess({"CLAUDEOPS_STATE_DIR": str(state), "CLAUDEOPS_INTERVAL": "0",
                                "CLAUDEOPS_SECRET_KEY": "test-secret"}, tmp_path / "scheduler.log").start()
    assert process.process.wait(30) == 1
    log = process.log()
    assert f"Error: the state directory {state} cannot be written: Read-only file system" in log
    assert "Traceback" not in log
