"""`claudeops run`: a session and its escalations in the foreground."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.sessions.scheduler import RunnerLock
from tests import streamlines as sl
from tests.conftest import FAKE_CLAUDE, make_app
from tests.support.database import database_env, explicit_database_url, sqlite_only

CLAUDEOPS = Path(sys.executable).with_name("claudeops")


def claudeops_env(tmp_path: Path) -> dict:
    return dict(os.environ, CLAUDEOPS_STATE_DIR=str(tmp_path / "state"), CLAUDEOPS_CLAUDE_BIN=str(FAKE_CLAUDE),
                **database_env(tmp_path / "state"))


def stored_sessions(tmp_path: Path) -> list[tuple]:
    from sqlalchemy import create_engine, text
    engine = create_engine(explicit_database_url(tmp_path / "state"))
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT id, trigger, status FROM sessions ORDER BY id")).all()
    engine.dispose()
    return [tuple(row) for row in rows]


def test_run_prints_the_outcome_and_exits_zero(tmp_path, fake_cli):
    fake_cli(sl.steps(sl.init(), sl.text("All healthy. [EVENT:info:web] up"), sl.result("All healthy.")))
    result = subprocess.run([str(CLAUDEOPS), "run", "--tier", "2"], env=claudeops_env(tmp_path),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["session #1: completed", "All healthy. [EVENT:info:web] up"]


def test_a_relative_results_directory_is_taken_from_the_working_directory_once(tmp_path, fake_cli):
    """A relative CLAUDEOPS_RESULTS_DIR (or CLAUDEOPS_WORKDIR) is taken from
    the working directory as the settings are read, as the state directory
    is: the run log's path a session records is whole, so that a command run
    later from another directory, with the service's settings, finds the run
    logs instead of taking them for gone and leaving them on the disk."""
    from sqlalchemy import create_engine, text
    fake_cli(sl.steps(sl.init(), sl.text("All healthy."), sl.result("All healthy.")))
    started_in, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    started_in.mkdir()
    elsewhere.mkdir()
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_RESULTS_DIR="runs", CLAUDEOPS_WORKDIR="work")
    ran = subprocess.run([str(CLAUDEOPS), "run"], env=env, cwd=started_in, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    results = started_in / "runs"
    run_logs = sorted(results.glob("session-*"))
    assert [path.suffix for path in run_logs] == [".ndjson", ".log"]
    assert (started_in / "work").is_dir()
    shown = subprocess.run([str(CLAUDEOPS), "config"], env=env, cwd=started_in, capture_output=True, text=True,
                           timeout=60)
    assert {f"CLAUDEOPS_RESULTS_DIR={results}", f"CLAUDEOPS_WORKDIR={started_in / 'work'}"} <= set(
        shown.stdout.splitlines())
    engine = create_engine(explicit_database_url(tmp_path / "state"))
    with engine.begin() as connection:
        assert connection.execute(text("SELECT log_path FROM sessions")).scalar() == str(run_logs[0])
        connection.execute(text("UPDATE sessions SET ended_at = :old"), {"old": "2000-01-01 00:00:00"})
    engine.dispose()
    pruned = subprocess.run([str(CLAUDEOPS), "prune"], env=dict(env, CLAUDEOPS_RESULTS_DIR=str(results)),
                            cwd=elsewhere, capture_output=True, text=True, timeout=60)
    assert pruned.returncode == 0, pruned.stderr
    assert "2 run log files" in pruned.stdout, pruned.stdout
    assert not any(path.exists() for path in run_logs)


def test_run_runs_the_escalations_of_its_session_in_the_foreground(tmp_path, fake_cli):
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the disk is full"), sl.result("Escalating.")))
    result = subprocess.run([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("session #")] == [
        "session #1: completed",
        "session #1 escalated to tier 2 (investigate) as session #2: the disk is full",
        "session #2: completed",
        "session #2 escalated to tier 3 (remediate) as session #3: the disk is full",
        "session #3: completed",   # the highest tier: its request is refused
    ]
    assert stored_sessions(tmp_path) == [(1, "cli", "completed"), (2, "escalation", "completed"),
                                         (3, "escalation", "completed")]   # none left queued for a scheduler


def test_run_refuses_a_working_directory_it_cannot_make_and_records_no_session(tmp_path, fake_cli):
    fake_cli(sl.steps(sl.init(), sl.result("never run")))
    a_file = tmp_path / "not-a-directory"
    a_file.write_text("")
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_WORKDIR=str(a_file))
    result = subprocess.run([str(CLAUDEOPS), "run"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (f"Error: the working directory {a_file} cannot be written: File exists "
                                      "(make it writable or set CLAUDEOPS_WORKDIR)")
    # Refused before anything is recorded: no session left "running" for the next start to call interrupted.
    from sqlalchemy import create_engine, inspect
    engine = create_engine(explicit_database_url(tmp_path / "state"))
    try:
        tables = inspect(engine).get_table_names()
    finally:
        engine.dispose()
    assert "sessions" not in tables or stored_sessions(tmp_path) == []


def test_run_exits_one_when_the_last_session_of_the_chain_fails(tmp_path, fake_cli):
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the disk is full"), sl.result("Escalating.")))
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "tier1-observe.md").write_text("# Observe\n")   # and no tier 2 prompt
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_PROMPTS_DIR=str(prompts))
    result = subprocess.run([str(CLAUDEOPS), "run"], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1].startswith("session #2: failed (cannot read tier 2 prompt")
    assert stored_sessions(tmp_path) == [(1, "cli", "completed"), (2, "escalation", "failed")]


def test_a_stop_as_the_session_ends_leaves_no_escalation_queued(tmp_path, fake_cli, capsys):
    """SIGTERM or Ctrl-C arriving as a session ends, after its escalation was queued."""
    import threading

    from app.cli import _run_chain
    from app.hookspecs import hookimpl
    from tests.conftest import make_app
    shutdown = threading.Event()

    class StopAsItEnds:
        @hookimpl
        def claudeops_session_finished(self, run, result):
            shutdown.set()

    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the disk is full"), sl.result("Escalating.")))
    with make_app(tmp_path, plugins=[StopAsItEnds()]).app_context():
        last = _run_chain(1, None, shutdown)
    assert (last.id, last.status, last.status_reason) == (2, "stopped", "stopped by the operator before it started")
    assert capsys.readouterr().out.splitlines()[-1] == "session #2: stopped (stopped by the operator before it started)"


def test_run_says_so_when_the_database_refuses_the_escalation_its_session_asked_for(tmp_path, fake_cli, monkeypatch):
    """Its end is recorded: "the session could not be recorded" would be
    untrue, and the request would be lost unsaid."""
    from sqlalchemy.exc import OperationalError

    from app.cli import main
    from app.sessions import escalation
    refused = OperationalError("INSERT INTO sessions", {}, sqlite3.OperationalError("database or disk is full"))
    monkeypatch.setattr(escalation, "consider", lambda *args: (_ for _ in ()).throw(refused))
    fake_cli(sl.steps(sl.init(), sl.text("[ESCALATE] the disk is full"), sl.result("Escalating.")))
    result = make_app(tmp_path).test_cli_runner().invoke(main, ["run"])
    assert result.exit_code == 1 and result.exception is not None and isinstance(result.exception, SystemExit)
    assert ("Error: session #1 ended completed, but the escalation it asked for (the disk is full) could not be "
            "queued: the disk holding the database is full (database or disk is full); run tier 2 by hand if it "
            "is still wanted") in result.output
    assert stored_sessions(tmp_path) == [(1, "cli", "completed")]


@pytest.mark.parametrize("prompt, message", [
    ("x" * 20001, b"Error: prompt is 20001 characters; the limit is 20000"),
    (b"not UTF-8: \xff", b"Error: prompt must be text: it holds bytes that are not UTF-8"),
])
def test_run_refuses_a_prompt_it_cannot_queue_with_a_message(tmp_path, prompt, message):
    result = subprocess.run([str(CLAUDEOPS), "run", "--prompt", prompt], env=claudeops_env(tmp_path),
                            capture_output=True, timeout=60)
    assert result.returncode == 1 and b"Traceback" not in result.stderr
    assert result.stderr.startswith(message), result.stderr   # before the migrations' log: nothing was started
    assert not (tmp_path / "state").exists()   # nor the state directory made


def test_run_exits_one_with_the_reason_when_the_session_fails(tmp_path, fake_cli):
    fake_cli(sl.steps(sl.init()) + [{"exit": 2}])
    result = subprocess.run([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert result.stdout.startswith("session #1: failed (the Claude CLI exited with status 2")


@pytest.mark.parametrize("stop_signal, said", [(signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP: its terminal closed"),
                                               (signal.SIGINT, "SIGINT: Ctrl-C")], ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_sigterm_stops_the_foreground_session(tmp_path, fake_cli, stop_signal, said):
    """SIGHUP: the terminal or SSH connection it ran in closed."""
    started = fake_cli(sl.steps(sl.init(), sl.text("working")) + [{"sleep": 60}])
    process = subprocess.Popen([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not started.exists():   # the fake CLI writes its argv when it starts
        assert time.monotonic() < deadline and process.poll() is None, "the CLI never started"
        time.sleep(0.1)
    process.send_signal(stop_signal)
    output, _ = process.communicate(timeout=20)
    assert process.returncode == 1
    assert output.startswith(f"session #1: stopped (`claudeops run` was stopped ({said}))")


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


def test_the_schema_is_not_changed_under_a_running_service(tmp_path):
    """The service of the older version would go on with a schema it was
    not written for; `db upgrade` (downgrade, stamp) waits for its stop."""
    from sqlalchemy import create_engine, inspect
    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "0002_events"], env=env, capture_output=True, check=True,
                   timeout=60)
    lock = RunnerLock(str(tmp_path / "state"), explicit_database_url(tmp_path / "state"))
    lock.acquire()
    try:
        for command in (["upgrade", "heads"], ["downgrade", "base"], ["stamp", "heads"]):
            result = subprocess.run([str(CLAUDEOPS), "db", *command], env=env, capture_output=True, text=True,
                                    timeout=60)
            assert result.returncode == 1, command
            assert f"another Claude Ops process (pid {os.getpid()}) is running sessions" in result.stderr
            assert "then run this command" in result.stderr and "Traceback" not in result.stderr
    finally:
        lock.release()
    engine = create_engine(explicit_database_url(tmp_path / "state"))
    assert not inspect(engine).has_table("memories")   # still at 0002
    engine.dispose()
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)


@sqlite_only("a state directory holds the database")
def test_changing_the_schema_of_no_database_says_there_is_none(tmp_path):
    """No scheduler can hold a lock in a state directory that is not there:
    the command says what is missing, not that it cannot make a lock file."""
    env = claudeops_env(tmp_path)
    for command in (["downgrade", "base"], ["stamp", "heads"]):
        result = subprocess.run([str(CLAUDEOPS), "db", *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, command
        assert "Error: there is no Claude Ops database at " in result.stderr, result.stderr
        assert "lock file" not in result.stderr and not (tmp_path / "state").exists()


def test_the_sql_of_a_migration_is_refused_before_anything_is_written(tmp_path):
    """Revisions read the rows they change (0006 fills memories.decay_due_at
    from them) and the dialect they meet: a script written out beforehand
    would stop part way, after a part of it was printed. The operator is told
    what to run instead, and neither a database nor a state directory is made."""
    env = claudeops_env(tmp_path)
    for command in (["upgrade", "--sql"], ["upgrade", "base:0003_memories", "--sql"],
                    ["downgrade", "0002_events:base", "--sql"]):
        result = subprocess.run([str(CLAUDEOPS), "db", *command], env=env, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 2, (command, result.stderr)
        assert result.stdout == ""
        assert "--sql cannot write this out: the service's revisions read the database they change" in result.stderr
        assert "run the command without --sql" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "state").exists()
    help_text = subprocess.run([str(CLAUDEOPS), "db", "upgrade", "--help"], env=env, capture_output=True, text=True,
                               timeout=60).stdout
    assert "Not offered: the revisions read the database they change" in " ".join(help_text.split())


def test_a_database_with_an_unknown_revision_gives_a_clear_error(tmp_path):
    """As after uninstalling a plugin whose branch is still applied."""
    from sqlalchemy import create_engine, text
    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)
    engine = create_engine(explicit_database_url(tmp_path / "state"))
    with engine.begin() as connection:
        connection.execute(text("INSERT INTO alembic_version VALUES ('gone_plugin_0001')"))
    engine.dispose()
    # The db commands that read its revision say so too, not Alembic's bare "Can't locate revision".
    for command in (["run"], ["db", "current"], ["db", "check"], ["db", "upgrade", "heads"],
                    ["db", "downgrade", "0001_sessions"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, command
        assert "is at schema revision gone_plugin_0001, which this installation does not know" in result.stderr
        # Both ways it comes about, each with its own way back: no downgrade for a newer version's database.
        assert "Either a newer version of Claude Ops migrated it: install that version again, or restore" in \
            result.stderr
        assert "Or a plugin whose tables are in it was uninstalled: reinstall it" in result.stderr
        assert "Traceback" not in result.stderr and "Can't locate revision" not in result.stderr
    history = subprocess.run([str(CLAUDEOPS), "db", "history"], env=env, capture_output=True, text=True, timeout=60)
    assert history.returncode == 0 and "0001_sessions" in history.stdout   # reads the files, not the database


def test_migrating_says_a_line_for_each_revision_and_nothing_of_alembic_s_own_set_up(tmp_path):
    env = claudeops_env(tmp_path)
    first = subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, text=True,
                           check=True, timeout=60).stderr.splitlines()
    applied = [line for line in first if "Running upgrade" in line]
    assert applied and applied[0].endswith("Running upgrade  -> 0001_sessions, Sessions and their activity log "
                                           "(the host's tables).")
    # A docstring of several lines and paragraphs: its first paragraph, on the one line.
    assert len(applied) == len(first), first
    assert not any(line.startswith("Context impl") or "Will assume" in line for line in first)
    again = subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, text=True,
                           check=True, timeout=60)
    assert again.stderr == ""
    debug = subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env={**env, "CLAUDEOPS_LOG_LEVEL": "DEBUG"},
                           capture_output=True, text=True, check=True, timeout=60)
    assert "Context impl" in debug.stderr   # all of it at DEBUG
    # Checking the schema says its finding alone, not each autogenerate plugin Alembic set up.
    check = subprocess.run([str(CLAUDEOPS), "db", "check"], env=env, capture_output=True, text=True,
                           check=True, timeout=60)
    assert (check.stdout + check.stderr).strip() == "No new upgrade operations detected."
    debug = subprocess.run([str(CLAUDEOPS), "db", "check"], env={**env, "CLAUDEOPS_LOG_LEVEL": "DEBUG"},
                           capture_output=True, text=True, check=True, timeout=60)
    assert "setting up autogenerate plugin" in debug.stderr


@sqlite_only("SQLite's write-ahead log")
def test_a_command_leaves_the_database_whole_in_its_file(tmp_path):
    """Its connections closed at exit: SQLite folds the write-ahead log
    into the file and removes it, so that a copy of the file made after
    the command (an operator's, by hand) holds all the command wrote."""
    env = claudeops_env(tmp_path)
    for command in (["db", "upgrade", "heads"], ["memories", "add", "--category", "timing", "Disk fills on Sundays"],
                    ["memories", "list"]):
        subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, check=True, timeout=60)
        assert not list((tmp_path / "state").glob("claudeops.db-*")), command   # no -wal, no -shm
    copy = tmp_path / "copy.db"
    copy.write_bytes((tmp_path / "state" / "claudeops.db").read_bytes())
    with sqlite3.connect(copy) as connection:
        assert connection.execute("SELECT observation FROM memories").fetchall() == [("Disk fills on Sundays",)]


def test_commands_that_read_or_write_rows_refuse_a_database_a_newer_version_migrated(tmp_path):
    """Its rows may mean what this version cannot know: only the commands
    that migrate, copy or restore a database whole, and config, run."""
    from sqlalchemy import create_engine, text
    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)
    engine = create_engine(explicit_database_url(tmp_path / "state"))
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0099_from_a_newer_version' "
                                "WHERE version_num LIKE '00%'"))   # the host's one head
    engine.dispose()
    for command in (["memories", "list"], ["cooldowns", "list"], ["prune"],
                    ["memories", "add", "--service", "nas", "--category", "timing", "The disk fills on Sundays"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, command
        assert "is at schema revision 0099_from_a_newer_version, which this installation does not know" in \
            result.stderr, result.stderr
        assert "install that version again, or restore the backup" in result.stderr
    engine = create_engine(explicit_database_url(tmp_path / "state"))
    with engine.connect() as connection:   # nothing was written
        assert connection.scalar(text("SELECT count(*) FROM memories")) == 0
    engine.dispose()
    for command in (["memories", "add", "--help"], ["config"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, (command, result.stderr)
        assert "which this installation does not know" not in result.stderr


def test_a_command_on_a_database_an_older_version_migrated_says_how_to_migrate_it(tmp_path):
    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "0002_events"], env=env, capture_output=True, check=True,
                   timeout=60)
    for command in (["memories", "list"], ["memories", "review"], ["cooldowns", "list"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, command
        assert "Error: the database is not migrated to this version of Claude Ops (" in result.stderr, result.stderr
        assert "run `claudeops db upgrade heads`" in result.stderr and "Traceback" not in result.stderr


def test_a_command_that_writes_to_a_table_an_older_version_made_says_how_to_migrate_it(tmp_path):
    """Its memories table lacks a later column: an INSERT is refused in
    words of its own on SQLite ("has no column named")."""
    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "0009_memory_outcomes"], env=env, capture_output=True,
                   check=True, timeout=60)
    result = subprocess.run([str(CLAUDEOPS), "memories", "add", "--service", "nas", "--category", "timing",
                             "The disk fills on Sundays"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "Error: the database is not migrated to this version of Claude Ops (" in result.stderr, result.stderr
    assert "status" in result.stderr and "Traceback" not in result.stderr


def test_a_command_on_a_state_directory_with_no_database_says_so_not_only_how_to_migrate(tmp_path):
    """The likeliest cause is a command run without the service's settings
    (the README's `sudo -u claudeops env CLAUDEOPS_STATE_DIR=...`): migrating
    there would make a second, empty database, so the error names the
    database it looked at and the settings that choose it first."""
    env = claudeops_env(tmp_path)
    (tmp_path / "state").mkdir()
    if "CLAUDEOPS_DATABASE_URL" not in env:   # on SQLite, an empty file, as an earlier version's commands left
        (tmp_path / "state" / "claudeops.db").touch()
    for command in (["memories", "list"], ["memories", "review"], ["cooldowns", "list"], ["prune"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, command
        assert "Error: there is no Claude Ops database at " in result.stderr, result.stderr
        assert "holds no tables" in result.stderr and "CLAUDEOPS_STATE_DIR" in result.stderr
        assert "`claudeops db upgrade heads`" in result.stderr and "Traceback" not in result.stderr


def sqlite_env(tmp_path: Path) -> dict:
    """``claudeops_env`` with the service's default database, a file in the state directory."""
    env = claudeops_env(tmp_path)
    env.pop("CLAUDEOPS_DATABASE_URL", None)
    return env


# Every command that only reads or changes what the service keeps.
COMMANDS_ON_THE_STATE = (["memories", "list"], ["memories", "context"], ["memories", "export"],
                         ["memories", "add", "--category", "timing", "x"], ["cooldowns", "list"], ["prune"],
                         ["db", "current"], ["db", "check"], ["mcp", "--list"], ["db", "history"], ["config"],
                         ["backup", "copy.db"], ["db", "downgrade", "base"], ["db", "stamp", "heads"])


def test_a_command_on_a_state_directory_that_is_not_there_says_so_and_makes_nothing(tmp_path):
    """A mistyped CLAUDEOPS_STATE_DIR: no directory, empty database or
    cookie key is left there, which the next command would take for the
    service's (one with tables missing, not the wrong one)."""
    env = sqlite_env(tmp_path)
    state = tmp_path / "state"
    for command in COMMANDS_ON_THE_STATE:
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, cwd=tmp_path, capture_output=True, text=True,
                                timeout=60)
        assert not state.exists(), command
        assert "Traceback" not in result.stderr, command
        if command[0] not in ("mcp", "config", "backup") and command[:2] != ["db", "history"]:
            assert result.returncode == 1, command
            assert (f"Error: there is no Claude Ops database at sqlite:///{state}/claudeops.db: the state directory "
                    f"{state} does not exist. Run the command with the service's settings") in result.stderr, command
            assert "`claudeops db upgrade heads`" in result.stderr, command


def test_a_command_on_a_state_directory_without_its_database_makes_none(tmp_path):
    env = sqlite_env(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    for command in COMMANDS_ON_THE_STATE:
        subprocess.run([str(CLAUDEOPS), *command], env=env, cwd=tmp_path, capture_output=True, timeout=60)
        assert sorted(path.name for path in state.iterdir()) == [], command
    result = subprocess.run([str(CLAUDEOPS), "memories", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"Error: there is no Claude Ops database at sqlite:///{state}/claudeops.db: there is no such file. " \
        in result.stderr, result.stderr


def test_the_commands_that_start_a_database_make_the_state_directory(tmp_path):
    env = sqlite_env(tmp_path)
    state = tmp_path / "state"
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)
    assert {"claudeops.db", "results", "secret_key"} <= {path.name for path in state.iterdir()}
    for directory in (state, state / "results"):   # the service's user's only, as the service makes them
        assert directory.stat().st_mode & 0o777 == 0o700
    listed = subprocess.run([str(CLAUDEOPS), "memories", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0 and "0 of 0 memories" in listed.stderr, listed.stderr
    subprocess.run([str(CLAUDEOPS), "backup", str(tmp_path / "copy.db")], env=env, capture_output=True, check=True,
                   timeout=60)
    elsewhere = tmp_path / "new-host"   # a backup brought to a new host
    restored = subprocess.run([str(CLAUDEOPS), "restore", str(tmp_path / "copy.db")],
                              env=dict(env, CLAUDEOPS_STATE_DIR=str(elsewhere)), capture_output=True, text=True,
                              timeout=60)
    assert restored.returncode == 0, restored.stderr
    assert {"claudeops.db", "results", "secret_key"} <= {path.name for path in elsewhere.iterdir()}


def test_a_state_directory_that_cannot_be_made_is_a_clear_error(tmp_path):
    (tmp_path / "a-file").write_text("")
    state = tmp_path / "a-file" / "state"
    env = dict(sqlite_env(tmp_path), CLAUDEOPS_STATE_DIR=str(state))
    for command in (["db", "upgrade", "heads"], ["run"], ["scheduler"], ["restore", str(tmp_path / "a-file")]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, command
        assert (f"Error: cannot make the state directory {state}: {tmp_path / 'a-file'} is a file, not a directory "
                "(set CLAUDEOPS_STATE_DIR to a path under a directory)\n") == result.stderr, command


def test_a_state_directory_that_is_a_file_is_named_so(tmp_path):
    state = tmp_path / "state"
    state.write_text("")   # a file where the directory should be: a mistyped path, say
    env = sqlite_env(tmp_path)
    made = subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert (made.returncode, made.stderr) == (
        1, f"Error: the state directory {state} is not a directory (set CLAUDEOPS_STATE_DIR)\n")
    listed = subprocess.run([str(CLAUDEOPS), "memories", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 1
    assert (f"Error: there is no Claude Ops database at sqlite:///{state}/claudeops.db: the state directory {state} "
            "is not a directory. ") in listed.stderr, listed.stderr


def test_a_cookie_key_that_is_not_text_is_a_clear_error(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "secret_key").write_bytes(b"\xff\xfe")
    env = {k: v for k, v in sqlite_env(tmp_path).items() if k != "CLAUDEOPS_SECRET_KEY"}
    result = subprocess.run([str(CLAUDEOPS), "memories", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (
        78, f"Error: cannot read {state}/secret_key: it is not UTF-8 text (remove it to have a new key made)\n")


def test_restore_on_postgresql_makes_no_state_directory(tmp_path):
    """It refuses, changing nothing: a state directory made for it included."""
    state = tmp_path / "state"
    env = dict(sqlite_env(tmp_path), CLAUDEOPS_DATABASE_URL="postgresql+psycopg://ops:hunter2@db.local/claudeops")
    (tmp_path / "copy.db").write_text("")
    result = subprocess.run([str(CLAUDEOPS), "restore", str(tmp_path / "copy.db")], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and "the database is postgresql, not SQLite" in result.stderr, result.stderr
    assert not state.exists()


def test_a_database_file_that_is_not_a_database_is_a_clear_error_for_every_command(tmp_path):
    database = tmp_path / "ops.db"
    database.write_text("not a database: a file overwritten, or the wrong path\n" * 20)
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_DATABASE_URL=f"sqlite:///{database}")
    for command in (["memories", "list"], ["memories", "add", "--category", "timing", "x"], ["cooldowns", "list"],
                    ["prune"], ["db", "current"], ["db", "upgrade", "heads"], ["run"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, command
        assert (f"Error: cannot use the database sqlite:///{database}: the file is not a SQLite database, or is "
                "damaged (file is not a database)") in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_a_database_that_cannot_be_opened_is_a_clear_error(tmp_path):
    missing = tmp_path / "not-there" / "ops.db"
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_DATABASE_URL=f"sqlite:///{missing}")
    for command in (["memories", "list"], ["db", "current"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, command
        assert (f"Error: there is no Claude Ops database at sqlite:///{missing}: its directory {missing.parent} "
                "does not exist") in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full, whose every write fails")
@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_output_that_cannot_be_written_is_a_clear_error(tmp_path, unbuffered):
    env = dict(claudeops_env(tmp_path), PYTHONUNBUFFERED=unbuffered)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)
    with open("/dev/full", "w") as full:
        for command in (["--help"], ["config"], ["memories", "add", "--category", "timing", "x"],
                        ["memories", "export"], ["memories", "export", "--format", "markdown"]):
            result = subprocess.run([str(CLAUDEOPS), *command], env=env, stdout=full, stderr=subprocess.PIPE,
                                    text=True, timeout=60)
            assert result.returncode == 1, command
            assert result.stderr == "Error: cannot write to standard output: No space left on device\n", command


def test_agent_text_reaches_a_terminal_shown_not_acted_on(tmp_path):
    """An escape sequence the agent copied from a tool's output (to retitle
    the window, hide a line), or a direction control, is shown on the
    operator's terminal; a file or a pipe gets the bytes as they are, as an
    export must."""
    import os
    import pty
    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)
    observation = "Restarts \x1b]0;owned\x07clean\x1b[2K \u009b31m after \x7f upgrades \u202edb\u202c \u2066up\u2069"
    subprocess.run([str(CLAUDEOPS), "memories", "add", "--category", "timing", "--service", "web", observation],
                   env=env, capture_output=True, check=True, timeout=60)
    primary, secondary = pty.openpty()
    try:
        listing = subprocess.run([str(CLAUDEOPS), "memories", "list"], env=env, stdout=secondary,
                                 stderr=subprocess.PIPE, timeout=60)
        os.close(secondary)
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:   # the terminal's other end is closed: all was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(primary)
    assert listing.returncode == 0, listing.stderr
    assert (b"Restarts \\x1b]0;owned\\x07clean\\x1b[2K \\x9b31m after \\x7f upgrades \\u202edb\\u202c "
            b"\\u2066up\\u2069") in shown
    assert b"\x1b" not in shown and b"\x07" not in shown and "\u009b".encode() not in shown
    assert "\u202e".encode() not in shown and "\u2066".encode() not in shown
    # Into a pipe, as written: click's removal of colour codes (\x1b[2K here) is off.
    piped = subprocess.run([str(CLAUDEOPS), "memories", "list"], env=env, capture_output=True, timeout=60)
    assert observation.encode() in piped.stdout
    for command in (["memories", "export", "--format", "markdown"], ["memories", "context"]):
        exported = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, timeout=60)
        assert observation.encode() in exported.stdout, command


def test_a_value_that_is_not_utf8_on_the_command_line_is_refused_in_a_line_and_stores_nothing(tmp_path):
    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)
    for command in ([b"memories", b"add", b"--category", b"timing", b"restarts take 5 min \xff\xfe"],
                    [b"memories", b"list", b"--service", b"web\xff"],
                    [b"cooldowns", b"list", b"--service", b"web\xff"]):
        result = subprocess.run([str(CLAUDEOPS).encode(), *command], env=env, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 1, command
        assert "Error: a value given on the command line is not UTF-8 text" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    listed = subprocess.run([str(CLAUDEOPS), "memories", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert "0 of 0 memories" in listed.stdout + listed.stderr and listed.returncode == 0


def test_an_unreachable_database_is_a_clear_error_without_its_password(tmp_path):
    from tests.support.service import free_port
    url = f"postgresql+psycopg://ops:hunter2@127.0.0.1:{free_port()}/claudeops"   # nothing listens there
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_DATABASE_URL=url)
    # Both take the scheduler's lock first, before the migrations.
    for command in (["run"], ["scheduler"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1
        assert "Error: cannot reach the database postgresql+psycopg://ops:***@127.0.0.1:" in result.stderr
        assert "(to take the scheduler's lock there)" in result.stderr and "Connection refused" in result.stderr
        assert "hunter2" not in result.stderr and "Traceback" not in result.stderr


def test_help_with_an_invalid_setting_says_so_in_a_line_and_still_helps(tmp_path):
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_INTERVAL="abc")
    result = subprocess.run([str(CLAUDEOPS), "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "Error: invalid configuration: CLAUDEOPS_INTERVAL='abc': must be a whole number"
    assert "Commands:" in result.stdout and "  run " in result.stdout


def test_a_plugins_command_with_an_invalid_setting_says_why_once(tmp_path):
    """Not the reason, then "No such command" with the usage: the command
    is there, the application it needs cannot be made."""
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_INTERVAL="abc")
    for command in (["memories", "list"], ["cooldowns", "list"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert (result.returncode, result.stderr) == (
            78, "Error: invalid configuration: CLAUDEOPS_INTERVAL='abc': must be a whole number\n"), command
    unknown = subprocess.run([str(CLAUDEOPS), "nosuch"], env=claudeops_env(tmp_path), capture_output=True,
                             text=True, timeout=60)
    assert unknown.returncode == 2 and "No such command 'nosuch'" in unknown.stderr


def test_a_plugin_that_breaks_at_start_up_stops_a_command_with_a_line_naming_it(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from app import cli
    from app.hookspecs import hookimpl

    class Broken:
        __name__ = "broken"

        @hookimpl
        def claudeops_settings(self):
            raise RuntimeError("plugin bug")

    monkeypatch.setattr(cli, "create_app", lambda **_: make_app(tmp_path, plugins=[Broken()]))
    result = CliRunner().invoke(cli.main, ["config"])
    assert result.exit_code == 78
    assert result.output.strip() == "Error: plugin broken failed in claudeops_settings: RuntimeError: plugin bug"
    listed = CliRunner().invoke(cli.main, ["--help"])
    assert listed.exit_code == 0 and "Traceback" not in listed.output
    assert "Error: plugin broken failed in claudeops_settings" in listed.output and "Commands:" in listed.output


def test_a_database_in_a_directory_that_is_not_there_is_a_clear_error(tmp_path):
    missing = tmp_path / "not-there" / "ops.db"
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_DATABASE_URL=f"sqlite:///{missing}")
    for command in (["scheduler"], ["run"]):
        result = subprocess.run([str(CLAUDEOPS), *command], env=env, capture_output=True, text=True, timeout=60)
        assert result.returncode == 1
        assert f"cannot make the scheduler's lock file {missing}.scheduler.lock" in result.stderr
        assert "Traceback" not in result.stderr


def test_a_lock_file_that_cannot_be_written_is_a_clear_error(tmp_path):
    """A full disk (here /dev/full, where every write fails so) stops the
    start naming the file and why, not with a traceback."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "scheduler.lock").symlink_to("/dev/full")
    result = subprocess.run([str(CLAUDEOPS), "run"], env=claudeops_env(tmp_path), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert f"cannot write the scheduler's lock file {state / 'scheduler.lock'}: " in result.stderr
    assert "Traceback" not in result.stderr


def test_a_lock_file_whose_flush_fails_is_a_clear_error_however_its_close_goes(tmp_path, monkeypatch):
    """On a full disk the truncation goes through and the write is only
    buffered: the flush fails, and the close, flushing again, fails too."""
    import errno
    import io

    from app.sessions import runner_lock

    class FullDisk(io.StringIO):
        def flush(self):
            if self.getvalue():
                raise OSError(errno.ENOSPC, "No space left on device")

        def fileno(self):
            return real.fileno()

        def close(self):   # as a file's: what is buffered is written first
            try:
                self.flush()
            finally:
                super().close()

    real = open(tmp_path / "scheduler.lock", "a+")
    monkeypatch.setattr(runner_lock, "open", lambda path, mode: FullDisk(), raising=False)
    with pytest.raises(runner_lock.RunnerLockError, match="cannot write the scheduler's lock file .*: No space left"):
        runner_lock.RunnerLock(str(tmp_path)).acquire()
    real.close()


def test_config_never_prints_the_database_password(tmp_path):
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_DATABASE_URL="postgresql+psycopg://ops:hunter2@db.local/claudeops")
    result = subprocess.run([str(CLAUDEOPS), "config"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "CLAUDEOPS_DATABASE_URL=postgresql+psycopg://ops:***@db.local/claudeops" in result.stdout.splitlines()
    assert "hunter2" not in result.stdout


def test_a_misspelt_setting_in_the_environment_is_warned_of_not_ignored_silently(tmp_path):
    """The default would hold without a word. The service's own variables
    between its processes, and the tests', are no settings and no warning."""
    env = dict(claudeops_env(tmp_path), CLAUDEOPS_INTERVL="600", CLAUDEOPS_FROBNICATE="1", CLAUDEOPS_TIER="2",
               CLAUDEOPS_TEST_ANYTHING="x")
    result = subprocess.run([str(CLAUDEOPS), "config"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "no setting" in line]
    assert warned == [
        "# CLAUDEOPS_FROBNICATE is set, but it is no setting of Claude Ops or of a plugin it loaded: it is ignored",
        "# CLAUDEOPS_INTERVL is set, but it is no setting of Claude Ops or of a plugin it loaded (did you mean "
        "CLAUDEOPS_INTERVAL?): it is ignored"]
    assert "CLAUDEOPS_INTERVAL=3600" in result.stdout.splitlines()


NO_RUNTIME_SETTINGS = "# runtime settings unavailable: "
VALUES_SHOWN = "# the values below are the environment's and the defaults\n"


def config_of(env: dict) -> subprocess.CompletedProcess:
    result = subprocess.run([str(CLAUDEOPS), "config"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"CLAUDEOPS_STATE_DIR={env['CLAUDEOPS_STATE_DIR']}" in result.stdout.splitlines()
    assert "CLAUDEOPS_INTERVAL=3600" in result.stdout.splitlines()
    assert "CLAUDEOPS_MEMORY_BUDGET=2000" in result.stdout.splitlines()   # a plugin's, as the Config page lists it
    return result


def test_config_before_the_service_ever_ran_shows_the_settings_and_says_there_is_no_database_yet(tmp_path):
    """The first thing to check on a new host: the settings, not a database error."""
    env = sqlite_env(tmp_path)
    state = tmp_path / "state"
    made_by = "starting the service, or `claudeops db upgrade heads`,"
    assert config_of(env).stderr == (
        f"{NO_RUNTIME_SETTINGS}there is no database yet at sqlite:///{state}/claudeops.db (the state directory "
        f"{state} does not exist); {made_by} makes it\n{VALUES_SHOWN}")
    state.mkdir()
    (state / "claudeops.db").touch()   # an empty one, as an earlier version's commands left
    assert config_of(env).stderr == (
        f"{NO_RUNTIME_SETTINGS}the database sqlite:///{state}/claudeops.db holds no tables yet; {made_by} makes "
        f"them\n{VALUES_SHOWN}")
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "0002_events"], env=env, capture_output=True, check=True,
                   timeout=60)
    assert config_of(env).stderr == (
        f"{NO_RUNTIME_SETTINGS}the database sqlite:///{state}/claudeops.db is not migrated to this version yet; "
        f"{made_by} migrates it\n{VALUES_SHOWN}")


def test_config_with_a_database_it_cannot_use_shows_the_settings_and_names_the_database(tmp_path):
    from tests.support.service import free_port
    url = f"postgresql+psycopg://ops:hunter2@127.0.0.1:{free_port()}/claudeops"   # nothing listens there
    result = config_of(dict(sqlite_env(tmp_path), CLAUDEOPS_DATABASE_URL=url))
    assert result.stderr.startswith(f"{NO_RUNTIME_SETTINGS}cannot use the database postgresql+psycopg://ops:***@"
                                    f"127.0.0.1:{url.rsplit(':', 1)[1]}: the database is unavailable ("), result.stderr
    assert "Connection refused" in result.stderr and result.stderr.endswith(f")\n{VALUES_SHOWN}")
    assert "hunter2" not in result.stderr + result.stdout
    damaged = tmp_path / "ops.db"
    damaged.write_text("not a database: a file overwritten, or the wrong path\n" * 20)
    result = config_of(dict(sqlite_env(tmp_path), CLAUDEOPS_DATABASE_URL=f"sqlite:///{damaged}"))
    assert result.stderr == (f"{NO_RUNTIME_SETTINGS}cannot use the database sqlite:///{damaged}: the file is not a "
                             "SQLite database, or is damaged (file is not a database); `claudeops restore` puts a "
                             f"backup in its place\n{VALUES_SHOWN}")


def test_config_prints_a_runtime_change_as_the_value_in_force(app, monkeypatch):
    from app import runtime
    from app.cli import main
    runtime.change({"CLAUDEOPS_INTERVAL": "600", "CLAUDEOPS_MEMORY_BUDGET": "500"})
    lines = app.test_cli_runner().invoke(main, ["config"]).output.splitlines()
    assert "CLAUDEOPS_INTERVAL=600  # changed on /config; the default is 3600" in lines
    assert "CLAUDEOPS_MEMORY_BUDGET=500  # changed on /config; the default is 2000" in lines
    assert "CLAUDEOPS_TIER1_MODEL=haiku" in lines   # unchanged: no note
    assert "CLAUDEOPS_DRY_RUN=false" in lines   # as the README and the Config page write it

    runtime.change({"CLAUDEOPS_INTERVAL": None})
    lines = app.test_cli_runner().invoke(main, ["config"]).output.splitlines()
    assert "CLAUDEOPS_INTERVAL=3600" in lines
    monkeypatch.setenv("CLAUDEOPS_MEMORY_BUDGET", "2000")
    lines = app.test_cli_runner().invoke(main, ["config"]).output.splitlines()
    assert "CLAUDEOPS_MEMORY_BUDGET=500  # changed on /config; the environment says 2000" in lines

    from app.extensions import db
    from app.models import RuntimeSetting
    db.session.get(RuntimeSetting, "CLAUDEOPS_MEMORY_BUDGET").value = "-5"   # as an earlier version might have taken
    db.session.commit()
    runtime.forget_cached()
    lines = app.test_cli_runner().invoke(main, ["config"]).output.splitlines()
    (line,) = [line for line in lines if line.startswith("CLAUDEOPS_MEMORY_BUDGET=")]
    assert line.startswith("CLAUDEOPS_MEMORY_BUDGET=2000  # the change stored on /config (-5) is ignored: "), line


@pytest.mark.parametrize("module", ["app", "app.cli"])
def test_the_command_runs_as_a_module_too(tmp_path, module):
    """``python -m app`` where the claudeops script is not on the PATH, and
    ``python -m app.cli``, which used to import the commands and run none."""
    env = claudeops_env(tmp_path)
    usage = subprocess.run([sys.executable, "-m", module, "--help"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: claudeops [OPTIONS] COMMAND"), usage.stderr
    config = subprocess.run([sys.executable, "-m", module, "config"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert config.returncode == 0, config.stderr
    assert f"CLAUDEOPS_STATE_DIR={env['CLAUDEOPS_STATE_DIR']}" in config.stdout.splitlines()


def test_db_help_says_which_commands_are_an_operators_and_which_write_revisions():
    from click.testing import CliRunner

    from app import cli
    result = CliRunner().invoke(cli.main, ["db", "--help"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "An operator's: upgrade heads (serve runs it), current, check, history, downgrade." in said
    assert ("For plugin authors (docs/example-plugin.md): revision, migrate, merge and edit write revision files; "
            "init and list-templates set up a directory for them.") in said
    assert "Perform database migrations" not in said


@pytest.mark.parametrize("command", ["upgrade", "current", "check", "downgrade", "stamp", "history", "revision", None])
def test_db_commands_help_gives_the_real_default_of_their_directory(command):
    """Not Flask-Migrate's "migrations" of the working directory, which the
    service never reads; the group's own option (None) as its commands'."""
    from click.testing import CliRunner

    from app import cli
    result = CliRunner().invoke(cli.main, ["db", *([command] if command else []), "--help"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "Migration script directory (default: the service's own, with its plugins' revisions)" in said
    assert 'default is "migrations"' not in said


def test_claudeops_runs_lock_thread_outlives_a_check_that_raises(monkeypatch, caplog):
    """A check that raises is logged and the lock is checked again: the
    run's lock goes on being watched, and a lock then lost stops the run."""
    from app import cli
    import threading
    from app.sessions import runner_lock
    monkeypatch.setattr(runner_lock, "CHECK_SECONDS", 0.01)
    answers = iter([RuntimeError("check failed"), True, False])

    class Lock:
        def verify(self):
            answer = next(answers)
            if isinstance(answer, Exception):
                raise answer
            return answer
    shutdown, finished = threading.Event(), threading.Event()
    keeper = threading.Thread(target=cli._keep_the_lock, args=(Lock(), shutdown, finished), daemon=True)
    keeper.start()
    keeper.join(10)
    assert not keeper.is_alive()
    assert shutdown.is_set() and shutdown.claudeops_reason == cli.LOST_LOCK_REASON
    assert "checking the database's runner lock failed" in caplog.text


def test_log_lines_are_stamped_in_utc_whatever_the_hosts_time_zone(tmp_path):
    """As the dashboard and the API give every time: a line can be set beside
    a session's start, and two hosts' logs sort together."""
    from datetime import datetime, timezone
    env = dict(claudeops_env(tmp_path), TZ="America/New_York")   # UTC-5 or -4: never UTC
    before = datetime.now(timezone.utc).replace(microsecond=0)
    upgrade = subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, text=True,
                             timeout=60)
    after = datetime.now(timezone.utc)
    assert upgrade.returncode == 0, upgrade.stderr
    first = upgrade.stderr.splitlines()[0]
    stamp, level, _ = first.split(" ", 2)
    assert level == "INFO" and stamp.endswith("Z"), first
    assert before <= datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc) <= after, first
