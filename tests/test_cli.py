"""`claudeops run`: one session in the foreground."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.sessions.scheduler import RunnerLock
from tests import streamlines as sl
from tests.conftest import FAKE_CLAUDE
from tests.support.database import database_env, explicit_database_url

CLAUDEOPS = Path(sys.executable).with_name("claudeops")


def claudeops_env(tmp_path: Path) -> dict:
    return dict(os.environ, CLAUDEOPS_STATE_DIR=str(tmp_path / "state"), CLAUDEOPS_CLAUDE_BIN=str(FAKE_CLAUDE),
                **database_env(tmp_path / "state"))


def test_run_prints_the_outcome_and_exits_zero(tmp_path, fake_cli):
    fake_cli(sl.steps(sl.init(), sl.text("All healthy. [EVENT:info:web] up"), sl.result("All healthy.")))
    result = subprocess.run([str(CLAUDEOPS), "run", "--tier", "2"], env=claudeops_env(tmp_path),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["session #1: completed", "All healthy. [EVENT:info:web] up"]


def test_run_exits_one_with_the_reason_when_the_session_fails(tmp_path, fake_cli):
    fake_cli(sl.steps(sl.init()) + [{"exit": 2}])
    result = subprocess.run([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert result.stdout.startswith("session #1: failed (the Claude CLI exited with status 2")


def test_sigterm_stops_the_foreground_session(tmp_path, fake_cli):
    started = fake_cli(sl.steps(sl.init(), sl.text("working")) + [{"sleep": 60}])
    process = subprocess.Popen([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists():   # the fake CLI writes its argv when it starts
        assert time.monotonic() < deadline and process.poll() is None, "the CLI never started"
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=20)
    assert process.returncode == 1
    assert output.startswith("session #1: stopped (the service shut down during the session)")


def test_run_refuses_while_another_process_runs_sessions(tmp_path):
    (tmp_path / "state").mkdir()
    lock = RunnerLock(str(tmp_path / "state"))
    lock.acquire()
    try:
        result = subprocess.run([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), capture_output=True,
                                text=True, timeout=60)
    finally:
        lock.release()
    assert result.returncode == 1
    assert f"another Claude Ops process (pid {os.getpid()}) is running sessions" in result.stderr
    assert "use Run now in its dashboard" in result.stderr


def test_a_database_with_an_unknown_revision_gives_a_clear_error(tmp_path):
    """As after uninstalling a plugin whose branch is still applied."""
    from sqlalchemy import create_engine, text
    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)
    engine = create_engine(explicit_database_url(tmp_path / "state"))
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO alembic_version VALUES ('gone_plugin_0001')"))
    engine.dispose()
    result = subprocess.run([str(CLAUDEOPS), "run"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "Can't locate revision identified by 'gone_plugin_0001'" in result.stderr
    assert "a plugin whose tables are in this database was uninstalled" in result.stderr


def test_an_unreachable_database_is_a_clear_error_without_its_password(tmp_path):
    from tests.support.service import free_port
    url = f"postgresql+psycopg://ops:hunter2@127.0.0.1:{free_port()}/claudeops"   # nothing listens there
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_DATABASE_URL=url)
    for command, message in ((["run"], "cannot take the scheduler's lock in the database"),
                             (["scheduler"], "cannot use the database")):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1
        assert f"{message} postgresql+psycopg://ops:***@127.0.0.1:" in result.stderr and "Connection refused" in result.stderr
        assert "hunter2" not in result.stderr and "Traceback" not in result.stderr


def test_config_never_prints_the_database_password(tmp_path):
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_DATABASE_URL="postgresql+psycopg://ops:hunter2@db.local/claudeops")
    result = subprocess.run([str(CLAUDEOPS), "config"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "CLAUDEOPS_DATABASE_URL=postgresql+psycopg://ops:***@db.local/claudeops" in result.stdout.splitlines()
    assert "hunter2" not in result.stdout


def test_config_prints_a_runtime_change_as_the_value_in_force(app):
    from app import runtime
    from app.cli import main
    runtime.change({"CLAUDEOPS_INTERVAL": "600", "CLAUDEOPS_MEMORY_BUDGET": "500"})
    lines = app.test_cli_runner().invoke(main, ["config"]).output.splitlines()
    assert "CLAUDEOPS_INTERVAL=600  # changed on /config; the environment says 3600" in lines
    assert "CLAUDEOPS_MEMORY_BUDGET=500  # changed on /config; the environment says 2000" in lines
    assert "CLAUDEOPS_TIER1_MODEL=haiku" in lines   # unchanged: no note

    runtime.change({"CLAUDEOPS_INTERVAL": None})
    lines = app.test_cli_runner().invoke(main, ["config"]).output.splitlines()
    assert "CLAUDEOPS_INTERVAL=3600" in lines
