"""Sessions through the real runner with a fake CLI: every way a session ends."""
from __future__ import annotations

import errno
import json
import logging
import re
import os
import signal
import subprocess
import threading
import time

import pytest
from sqlalchemy import select

from app import redaction
from app.extensions import db
from app.models import Session, SessionActivity
from app.runtime import SettingError, change
from app.sessions.activity import PREVIEW_CHARS
from plugins.events.models import Event
from tests import streamlines as sl
from tests.memory_helpers import stream_handler, text_line


def kinds(session):
    return [a.kind for a in db.session.scalars(select(SessionActivity).where(
        SessionActivity.session_id == session.id).order_by(SessionActivity.id))]


def test_completed_session_records_result_response_and_events(app, fake_cli, run_session_now):
    fake_cli(sl.steps(
        sl.init(),
        sl.text("Checking.\n[EVENT:info:jellyfin] Health check passed"),
        sl.tool_use("docker ps"),
        sl.tool_result("jellyfin Up 3 days"),
        sl.text("All good. [EVENT:warning:postgres] Slow queries", message_id="msg_last"),
        sl.result("All good. [EVENT:warning:postgres] Slow queries", cost=0.05, turns=2, duration_ms=2100),
    ))
    session = run_session_now()
    assert session.status == "completed", session.status_reason
    assert session.status_reason is None
    assert session.cost_usd == 0.05 and session.num_turns == 2 and session.duration_ms == 2100
    assert session.cli_session_id == sl.CLI_SESSION_ID
    assert session.exit_code == 0
    # The response is all of the agent's text, not only result.result.
    assert "Checking." in session.response and "All good." in session.response
    events = db.session.scalars(select(Event).order_by(Event.id)).all()
    assert [(e.level, e.service, e.message, e.session_id, e.tier) for e in events] == [
        ("info", "jellyfin", "Health check passed", session.id, 1),
        ("warning", "postgres", "Slow queries", session.id, 1),
    ]
    assert kinds(session) == ["text", "marker", "tool_use", "tool_result", "text", "marker"]


def test_raw_lines_go_to_the_sessions_own_run_log(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("hello"), sl.result("hello")) + [{"raw": "not json"}])
    first = run_session_now()
    second = run_session_now()
    assert first.log_path != second.log_path
    lines = open(first.log_path, "rb").read().splitlines()
    assert len(lines) == 4 and lines[-1] == b"not json"
    assert json.loads(lines[0])["subtype"] == "init"
    assert first.log_path.startswith(app.config["CLAUDEOPS_RESULTS_DIR"])


def test_run_logs_are_for_the_services_user_only(app, fake_cli, run_session_now):
    """The run log and the stderr log, and the results directory even when
    it was removed while the service runs (an operator's clean-up)."""
    import os
    import shutil
    fake_cli(sl.steps(sl.init(), sl.text("hello"), sl.result("hello")) + [{"stderr": "a warning"}])
    shutil.rmtree(app.config["CLAUDEOPS_RESULTS_DIR"])
    session = run_session_now()
    assert os.stat(app.config["CLAUDEOPS_RESULTS_DIR"]).st_mode & 0o777 == 0o700
    stderr_log = session.log_path.removesuffix(".ndjson") + ".stderr.log"
    assert [os.stat(path).st_mode & 0o777 for path in (session.log_path, stderr_log)] == [0o600, 0o600]


def test_argv_environment_and_prompts(app, fake_cli, run_session_now, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    session = run_session_now(tier=2, prompt="Look at the NAS too")
    recorded = json.loads(argv_file.read_text())
    argv = recorded["argv"]
    assert argv[0] == "-p"
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert "--verbose" in argv
    assert argv[argv.index("--model") + 1] == "sonnet"
    assert argv[argv.index("--allowedTools") + 1] == "Bash,Read,Grep,Glob,WebFetch,mcp__claudeops"  # + the memory tools
    assert argv[argv.index("--disallowedTools") + 1] == "Edit,Write"
    prompt = recorded["prompt"]
    assert argv[-2:] == ["--", prompt]   # after every option: a prompt may begin with "-"
    assert prompt.startswith("# Tier 2: Investigate")
    assert prompt.index("Tier 2: Investigate") < prompt.index("## Operator's request") < prompt.index("Look at the NAS too")
    system = argv[argv.index("--append-system-prompt") + 1]
    assert system == session.system_prompt
    assert system.startswith("## Environment") and f"session: #{session.id}" in system
    assert "## Reporting events" in system
    assert recorded["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/"
    assert recorded["env"]["CLAUDEOPS_SESSION_ID"] == str(session.id)


def test_a_prompt_file_with_front_matter_reaches_the_cli_as_its_prompt(app, fake_cli, run_session_now, tmp_path):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "tier1-observe.md").write_text("---\ntitle: Observe\n---\n# Tier 1\nLook around.\n")
    app.config["CLAUDEOPS_PROMPTS_DIR"] = str(prompts)
    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    session = run_session_now()
    assert session.status == "completed", session.status_reason
    assert json.loads(argv_file.read_text())["prompt"].startswith("---\ntitle: Observe\n---\n# Tier 1")


def test_a_working_directory_gone_bad_since_the_start_fails_the_session_with_why(app, fake_cli, run_session_now,
                                                                                 tmp_path):
    """Checked at start (app/serve.py); replaced by a file since, the
    session is recorded failed, naming it, not left running."""
    argv_file = fake_cli(sl.steps(sl.init(), sl.result("never run")))
    a_file = tmp_path / "workdir-now-a-file"
    a_file.write_text("")
    app.config["CLAUDEOPS_WORKDIR"] = str(a_file)
    session = run_session_now()
    assert session.status == "failed" and session.ended_at is not None
    assert session.status_reason == (f"the working directory {a_file} cannot be made: File exists "
                                     "(make it a writable directory or set CLAUDEOPS_WORKDIR)")
    assert not argv_file.exists()   # the CLI never started


def test_non_zero_exit_fails_with_stderr_in_reason(app, fake_cli, run_session_now, caplog):
    fake_cli(sl.steps(sl.init(), sl.text("partial")) + [{"stderr": "Error: invalid API key"}, {"exit": 3}])
    session = run_session_now()
    assert session.status == "failed"
    assert "exited with status 3" in session.status_reason
    assert "invalid API key" in session.status_reason
    assert session.response == "partial"
    # Seen by an operator who keeps the service log at WARNING.
    assert [r.levelname for r in caplog.records if r.getMessage().startswith(f"session {session.id} failed")] == \
        ["WARNING"]


def test_api_error_result_fails(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.api_error_text(500), sl.result("API Error: 500 Internal server error.",
                                                                      is_error=True, api_error_status=500))
             + [{"exit": 1}])
    session = run_session_now()
    assert session.status == "failed"
    assert session.status_reason.startswith("API error 500: API Error: 500")
    assert session.is_error is True


def test_a_session_cost_limit_is_given_to_the_cli_and_a_session_it_ended_says_so(app, fake_cli, run_session_now):
    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    run_session_now()
    assert "--max-budget-usd" not in json.loads(argv_file.read_text())["argv"]   # 0: no limit

    change({"CLAUDEOPS_SESSION_MAX_COST_USD": "0.5"})   # as /config would
    argv_file = fake_cli(sl.steps(sl.init(), sl.tool_use("docker ps"), sl.over_budget(0.5, 0.5213)) + [{"exit": 1}])
    session = run_session_now()
    argv = json.loads(argv_file.read_text())["argv"]
    assert argv[argv.index("--max-budget-usd") + 1] == "0.50" and argv.index("--max-budget-usd") < argv.index("--")
    assert (session.status, session.is_error, session.cost_usd) == ("failed", True, 0.5213)
    assert session.status_reason == ("the CLI reported an error: Reached maximum budget ($0.5) "
                                     "(CLAUDEOPS_SESSION_MAX_COST_USD; this session cost $0.52)")


@pytest.mark.parametrize("raw, problem", [("-1", "must be from 0 (no limit) to 1000"), ("1001", "must be from 0"),
                                          ("nan", "must be a number of US dollars"),
                                          ("1_0", "must be a number of US dollars"),
                                          ("lots", "must be a number of US dollars"),
                                          ("0.001", "must be at least 0.01 (a cent)")])
def test_a_session_cost_limit_that_is_no_amount_is_refused(app, raw, problem):
    with pytest.raises(SettingError, match=re.escape(problem)):
        change({"CLAUDEOPS_SESSION_MAX_COST_USD": raw})


@pytest.mark.parametrize("raw, limit", [("1e2", 100), (" 0.5 ", 0.5), ("0.005", 0.01), ("-0", 0)])
def test_a_session_cost_limit_is_kept_to_the_cent(app, raw, limit):
    from app.config import SETTINGS
    from app.web.config_page import shown
    spec = next(s for s in SETTINGS if s.name == "CLAUDEOPS_SESSION_MAX_COST_USD")
    assert spec.parse(raw) == limit and shown(spec, spec.parse(raw)) == str(float(limit))


def test_an_error_result_without_text_gives_its_errors_as_the_reason(app, fake_cli, run_session_now):
    """As the CLI ends a session at --max-turns, say: no result text, only errors."""
    line = sl.over_budget(1, 1.2)
    line.update(subtype="error_max_turns", errors=["Reached maximum number of turns (30)"] + ["x" * 400] * 5)
    fake_cli(sl.steps(sl.init(), line) + [{"exit": 1}])
    session = run_session_now()
    assert session.status == "failed"
    assert session.status_reason.startswith("the CLI reported an error: Reached maximum number of turns (30); xxx")
    assert len(session.status_reason) == len("the CLI reported an error: ") + 500


def test_an_error_cut_to_the_reason_keeps_no_part_of_a_secret_the_cut_runs_through(app, fake_cli, run_session_now):
    token = "ghp_" + "a1B2" * 9
    line = sl.over_budget(1, 1.2)
    line.update(subtype="error_max_turns", errors=["x" * 470 + " " + token])
    fake_cli(sl.steps(sl.init(), line) + [{"exit": 1}])
    session = run_session_now()
    assert session.status_reason == "the CLI reported an error: " + "x" * 470 + " [redacted]"


def test_a_cli_without_credentials_says_how_to_give_it_some_and_the_feed_says_the_session_failed(
        app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.result("Not logged in · Please run /login", is_error=True)) + [{"exit": 1}])
    session = run_session_now()
    assert session.status == "failed"
    assert session.status_reason == ("the CLI reported an error: Not logged in · Please run /login (give the "
                                     "service ANTHROPIC_API_KEY in its environment, or run `claude` once as the "
                                     "service's user and log in)")
    (event,) = db.session.scalars(select(Event)).all()
    assert (event.level, event.session_id, event.message) == (
        "warning", session.id, f"Session #{session.id} (tier 1) failed: {session.status_reason}")


@pytest.mark.parametrize("fixture_name", ["claude-code-2.1.197-c_error_http500.ndjson",
                                          "claude-code-2.1.330-c_error_http500.ndjson"])
def test_real_api_error_streams_fail_and_record_nothing_from_the_error_text(app, fake_cli, run_session_now, fixture_name):
    from tests.conftest import FIXTURES
    lines = (FIXTURES / fixture_name).read_text().splitlines()
    fake_cli([{"raw": line} for line in lines] + [{"exit": 1}])
    session = run_session_now()
    assert session.status == "failed"
    assert "API error 500" in session.status_reason
    # The only event is the service's notice that the session failed.
    assert db.session.scalars(select(Event.message)).all() == [f"Session #{session.id} (tier 1) failed: "
                                                               f"{session.status_reason}"]


def test_missing_binary_fails_with_a_clear_reason(app, run_session_now):
    app.config["CLAUDEOPS_CLAUDE_BIN"] = "/nonexistent/claude"
    session = run_session_now()
    assert session.status == "failed"
    assert "could not start the Claude CLI" in session.status_reason
    assert "/nonexistent/claude" in session.status_reason


def test_no_result_line_fails(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("I was cut off")))
    session = run_session_now()
    assert session.status == "failed"
    assert "without a result line" in session.status_reason


def process_gone(pid: int, within: float = 5.0) -> bool:
    """True once ``pid`` no longer runs (a zombie awaiting its reaper counts as gone)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_timeout_ends_the_whole_process_group(app, fake_cli, run_session_now, orphan_pid_file):
    app.config["CLAUDEOPS_SESSION_TIMEOUT"] = 1
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:nas] before the hang")) + [{"orphan": 60}, {"sleep": 60}])
    started = time.monotonic()
    session = run_session_now()
    assert time.monotonic() - started < 15
    assert session.status == "timed_out"
    assert "session timeout of 1 s" in session.status_reason
    assert process_gone(int(orphan_pid_file.read_text())), "the CLI's child outlived the timeout"
    # What arrived before the timeout is kept.
    assert db.session.scalar(select(Event.message)) == "before the hang"


def test_a_timeout_while_the_cli_retries_the_api_says_so(app, fake_cli, run_session_now):
    app.config["CLAUDEOPS_SESSION_TIMEOUT"] = 1
    fake_cli(sl.steps(sl.init(), sl.text("answered"), sl.api_retry(1), sl.api_retry(2, error="connection refused"))
             + [{"sleep": 60}])
    session = run_session_now()
    assert session.status == "timed_out"
    assert session.status_reason == ("exceeded the session timeout of 1 s; the CLI was retrying the API "
                                     "(API retry 2/10 after connection refused)")
    # Retries the API answered after are no reason.
    fake_cli(sl.steps(sl.init(), sl.api_retry(1), sl.text("answered")) + [{"sleep": 60}])
    assert run_session_now().status_reason == "exceeded the session timeout of 1 s"


def test_stop_request_ends_the_session_and_its_group(app, fake_cli, orphan_pid_file):
    from app.sessions import control
    from app.sessions.manager import run_session
    fake_cli(sl.steps(sl.init(), sl.text("working")) + [
        {"orphan": 60}, {"sleep": 60}])
    session = control.claim(control.enqueue().id)
    session_id = session.id

    def stop_soon():
        with app.app_context():
            time.sleep(1.0)
            control.request_stop(session_id)
            db.session.remove()
    stopper = threading.Thread(target=stop_soon)
    stopper.start()
    started = time.monotonic()
    session = run_session(session)
    stopper.join()
    assert session.status == "stopped"
    assert session.status_reason == "stopped by the operator"
    assert time.monotonic() - started < 10
    assert session.response == "working"
    assert process_gone(int(orphan_pid_file.read_text())), "the CLI's child outlived the stop"


def refused_as_another_users(monkeypatch) -> list[int]:
    """``os.killpg`` answering as the kernel does for a group whose members
    left all run as another user (kill(2): EPERM when no member could be
    signalled): this service's user cannot start such a process to test
    with. The signals it was asked to send."""
    from app.sessions import runner
    asked: list[int] = []

    def refused(pgid: int, sig: int) -> None:
        asked.append(sig)
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
    monkeypatch.setattr(runner.os, "killpg", refused)
    return asked


def test_a_group_left_to_another_user_is_named_in_a_warning_without_a_grace_period(monkeypatch, caplog):
    from app.sessions import runner
    proc = subprocess.Popen(["true"], start_new_session=True)
    proc.wait()   # reaped, as the runner reaps the CLI's guard before it ends the group
    asked = refused_as_another_users(monkeypatch)
    started = time.monotonic()
    runner._end_group(proc)
    runner._end_group(proc)   # every way out of a run ends the group again
    assert time.monotonic() - started < 1, "waited a grace period for processes it could not signal"
    assert asked == [signal.SIGTERM, signal.SIGTERM]   # no SIGKILL: the kernel let it signal none of them
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"process group {proc.pid} of the session's CLI could not be ended: what is left of it runs as another "
        "user (a setuid helper, or sudo), whom this service may not signal. It is left running, and the session "
        f"ends without it: end it as root or that user (kill -TERM -- -{proc.pid})"]


def test_a_session_whose_group_is_left_to_another_user_ends_as_its_cli_did(app, fake_cli, run_session_now,
                                                                          monkeypatch, caplog):
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] up"), sl.result("up")))
    refused_as_another_users(monkeypatch)
    session = run_session_now()
    assert (session.status, session.status_reason, session.response) == ("completed", None, "[EVENT:info:web] up")
    assert db.session.scalar(select(Event.message)) == "up"
    assert caplog.text.count("of the session's CLI could not be ended: what is left of it runs as another user") == 1


def test_a_stop_after_the_cli_finished_keeps_the_status_its_end_gives_it(app, fake_cli, orphan_pid_file):
    """Its leftover child holds stdout open a moment longer: a Stop then
    ends the child, and the session is completed, not stopped (nor
    escalated, the operator having asked to stop it)."""
    from app.sessions import control
    from app.sessions.manager import run_session
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the disk is failing"), sl.result("done")) + [{"orphan": 60}])
    session = control.claim(control.enqueue().id)
    session_id = session.id

    def stop_once_the_cli_exited():
        with app.app_context():
            deadline = time.monotonic() + 15
            while not orphan_pid_file.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)   # the CLI exits right after starting its child
            control.request_stop(session_id)
            db.session.remove()
    stopper = threading.Thread(target=stop_once_the_cli_exited)
    stopper.start()
    session = run_session(session)
    stopper.join()
    assert (session.status, session.status_reason) == ("completed", None)
    assert process_gone(int(orphan_pid_file.read_text())), "the CLI's child outlived the stop"
    assert [s.id for s in db.session.scalars(select(Session))] == [session_id]   # not escalated


def test_a_stop_as_the_cli_finished_keeps_its_last_lines_and_the_status_its_end_gives_it(
        app, fake_cli, run_session_now, tmp_path, monkeypatch):
    """The CLI writes its last lines and exits between two reads, and the
    runner then sees a Stop: those lines are read all the same, its result
    line with them, and the session is completed, as its end says."""
    from app.sessions import manager
    runs = tmp_path / "runs"
    monkeypatch.setenv("FAKE_CLAUDE_RUNS", str(runs))
    fake_cli(sl.steps(sl.init(), sl.text("checking")) + [{"sleep": 0.3}]
             + sl.steps(sl.text("[EVENT:critical:db] replication stopped"), sl.result("done")))

    def poller(session_id, shutdown):
        def should_stop():
            deadline = time.monotonic() + 15   # the first look comes once the CLI has exited
            while not runs.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.5)   # its guard mirrors its exit within 0.1 s
            return manager.OPERATOR_STOP_REASON
        return should_stop
    monkeypatch.setattr(manager, "_stop_poller", poller)
    session = run_session_now()
    assert (session.status, session.status_reason) == ("completed", None)
    assert session.response.endswith("replication stopped")
    assert db.session.scalar(select(Event.message).where(Event.session_id == session.id,
                                                         Event.service == "db")) == "replication stopped"


def test_a_timeout_after_the_cli_finished_keeps_the_status_its_end_gives_it(app, fake_cli, run_session_now,
                                                                           orphan_pid_file):
    """Its leftover child holds stdout open past the session's timeout: the
    child's group is ended, and the session is completed, not timed out."""
    fake_cli(sl.steps(sl.init(), sl.text("all done"), sl.result("done")) + [{"orphan": 60}])
    app.config["CLAUDEOPS_SESSION_TIMEOUT"] = 1
    session = run_session_now()
    assert (session.status, session.status_reason) == ("completed", None)
    assert process_gone(int(orphan_pid_file.read_text())), "the CLI's child outlived the session"


@pytest.mark.parametrize("ending", ["stopped", "timed_out"])
def test_what_the_cli_wrote_before_a_stop_or_a_timeout_is_kept_markers_and_all(app, fake_cli, run_session_now,
                                                                                 tmp_path, monkeypatch, ending):
    """The runner looks for a stop, and at its clock, between reads: by
    then the CLI may have written more (while a line's rows were committed,
    or the check waited on the database). What it wrote before its group was
    ended is read, into the run log and the session, markers and all."""
    from app.sessions import manager
    all_written = tmp_path / "all-written"
    markers = [f"[EVENT:warning:web] disk filling {number}" for number in range(1, 41)]
    fake_cli(sl.steps(sl.init(), sl.text(markers[0])) + [{"sleep": 0.3}]
             + sl.steps(*(sl.text(marker) for marker in markers[1:])) + [{"touch": str(all_written)}, {"sleep": 60}])
    app.config["CLAUDEOPS_SESSION_TIMEOUT"] = 1

    def poller(session_id, shutdown):
        def should_stop():
            # The first look comes once everything is written, none of it read yet.
            deadline = time.monotonic() + 15
            while not all_written.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            if ending == "stopped":
                return manager.OPERATOR_STOP_REASON
            time.sleep(1.1)   # past the session's timeout
            return None
        return should_stop
    monkeypatch.setattr(manager, "_stop_poller", poller)
    session = run_session_now()
    assert session.status == ending
    assert list(db.session.scalars(select(Event.message).where(Event.session_id == session.id)
                                   .where(Event.service == "web").order_by(Event.id))) == [
        marker.removeprefix("[EVENT:warning:web] ") for marker in markers]
    assert session.response.endswith("disk filling 40")
    with open(session.log_path) as run_log:
        assert sum("disk filling" in line for line in run_log) == 40


def test_a_stop_does_not_wait_for_a_process_that_left_the_group_holding_stdout(app, fake_cli, run_session_now,
                                                                              orphan_pid_file):
    """What the CLI wrote is read once its group has ended; a process that
    left the group (and so outlives it) holding stdout is not waited for."""
    fake_cli(sl.steps(sl.init(), sl.text("working")) + [{"orphan": 60, "leaves_group": True}, {"sleep": 60}])
    shutdown = threading.Event()
    threading.Timer(0.8, shutdown.set).start()
    started = time.monotonic()
    try:
        session = run_session_now(shutdown=shutdown)
        assert session.status == "stopped"
        assert time.monotonic() - started < 4
    finally:
        os.kill(int(orphan_pid_file.read_text()), signal.SIGKILL)


def test_a_secret_where_a_skipped_lines_preview_is_cut_is_redacted_whole(app, monkeypatch):
    """The activity log shows the start of a line the parser refused: a
    secret standing where that start is cut is found whole, not stored in
    part (the run log, the service's own file, keeps the line as it came)."""
    secret = "S3cretValue-9f8e7d6c"
    monkeypatch.setenv("DB_PASSWORD", secret)
    redaction.init_app(app)
    line = "x" * (PREVIEW_CHARS - 10) + " " + secret + " and then the rest of a line that is no JSON"
    handler = stream_handler()
    handler.handle_line(line.encode())
    handler.handle_line(text_line("[EVENT:info:web] still read"))
    handler.close()
    db.session.commit()
    [warning] = db.session.scalars(select(SessionActivity.body).where(SessionActivity.kind == "warning")).all()
    assert warning.startswith("not JSON") and "x" * (PREVIEW_CHARS - 10) in warning and warning.endswith("…")
    assert "S3c" not in warning and "[redact" in warning
    assert db.session.scalar(select(Event.message)) == "still read"


def test_a_skipped_line_shorter_than_its_preview_is_shown_whole_without_an_ellipsis(app):
    """Measured in characters, as the preview is cut: a line of accented
    letters has twice as many bytes, and nothing of it was left out."""
    line = "é" * (PREVIEW_CHARS - 50) + " is no JSON"
    assert len(line.encode()) > PREVIEW_CHARS >= len(line)
    handler = stream_handler()
    handler.handle_line(line.encode())
    handler.close()
    db.session.commit()
    [warning] = db.session.scalars(select(SessionActivity.body).where(SessionActivity.kind == "warning")).all()
    assert warning.endswith(f": {line}"), warning


def test_orphaned_stdout_does_not_hang_the_session(app, fake_cli, run_session_now, orphan_pid_file):
    fake_cli(sl.steps(sl.init(), sl.text("[EVENT:info:web] up")) + [{"orphan": 60}] + sl.steps(sl.result("up")))
    started = time.monotonic()
    session = run_session_now()
    elapsed = time.monotonic() - started
    assert session.status == "completed", session.status_reason
    assert elapsed < 10, f"session took {elapsed:.1f}s with an orphan holding stdout"
    assert process_gone(int(orphan_pid_file.read_text()))


def test_garbage_lines_are_skipped_and_the_session_goes_on(app, fake_cli, run_session_now, caplog):
    fake_cli(sl.steps(sl.init()) + [
        {"raw": "this is not json"},
        {"raw": "[1, 2, 3]"},
        {"raw": '{"type": 42}'},
        {"raw": '{"type": "brand_new_kind", "x": 1}'},
        {"raw": '{"type": "assistant", "message": "not an object"}'},
        {"raw": "\udcff\udcfe invalid utf-8"},
    ] + sl.steps(sl.text("[EVENT:critical:nas] Disk failing"), sl.result("done")))
    session = run_session_now()
    assert session.status == "completed"
    assert db.session.scalar(select(Event.message)) == "Disk failing"
    warnings = db.session.scalars(select(SessionActivity.body).where(SessionActivity.kind == "warning")).all()
    # not JSON, not an object, non-string type, an assistant line without content blocks, not UTF-8
    assert len(warnings) == 5
    assert any("not UTF-8" in w for w in warnings)
    assert "skipped stream line" in caplog.text


def test_ten_megabyte_line_is_skipped_and_kept_in_the_run_log(app, fake_cli, run_session_now):
    size = 10 * 1024 * 1024
    app.config["CLAUDEOPS_MAX_LINE_BYTES"] = 8 * 1024 * 1024
    fake_cli(sl.steps(sl.init()) + [{"big_line": size}] + sl.steps(sl.text("[EVENT:info:a] after"), sl.result()))
    session = run_session_now()
    assert session.status == "completed"
    assert db.session.scalar(select(Event.message)) == "after"
    warning = db.session.scalar(select(SessionActivity.body).where(SessionActivity.kind == "warning"))
    assert f"{size} bytes" in warning
    assert os.path.getsize(session.log_path) > size


def test_shutdown_stops_the_running_session(app, fake_cli, run_session_now):
    fake_cli(sl.steps(sl.init(), sl.text("working")) + [{"sleep": 60}])
    shutdown = threading.Event()
    threading.Timer(0.8, shutdown.set).start()
    session = run_session_now(shutdown=shutdown)
    assert session.status == "stopped"
    assert "service shut down" in session.status_reason
