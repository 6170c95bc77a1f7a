"""Schema only through Alembic; models and migrations never drift; SQLite
tuned for one writer and many readers; one timestamp format. Everything but
the SQLite tuning holds on PostgreSQL too."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import flask_migrate
import psycopg
import pytest
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from app import dbfaults
from app.extensions import db
from app.models import Session
from app.timeutil import isoformat, utcnow
from plugins.memory import search
from plugins.memory.queries import memory_query
from tests.support.database import explicit_database_url, postgres_only, sqlite_only


def test_upgrade_then_no_drift(app):
    # `flask db check` fails (raises) when autogenerate would find any change.
    flask_migrate.check()
    tables = set(inspect(db.engine).get_table_names())
    assert {"sessions", "session_activity", "events", "alembic_version"} <= tables


def test_drift_is_detected(app, caplog):
    """The check above can fail: a model change without a revision is caught."""
    from sqlalchemy import Column, Integer, Table
    extra = Table("not_migrated", db.metadata, Column("id", Integer, primary_key=True))
    try:
        with pytest.raises(SystemExit):
            flask_migrate.check()
    finally:
        db.metadata.remove(extra)
    assert "New upgrade operations detected" in caplog.text and "not_migrated" in caplog.text


def test_downgrade_to_base_and_up_again(app):
    flask_migrate.downgrade(revision="base")
    assert set(inspect(db.engine).get_table_names()) <= {"alembic_version"}
    flask_migrate.upgrade()
    flask_migrate.check()


@sqlite_only("WAL, the busy timeout and foreign-key enforcement are SQLite pragmas")
def test_sqlite_is_in_wal_mode_with_a_busy_timeout(app):
    with db.engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() >= 5000
        assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1
    assert app.config["SQLALCHEMY_DATABASE_URI"].endswith("/state/claudeops.db")


@sqlite_only("the write-ahead log is SQLite's")
def test_the_write_ahead_log_shrinks_back_after_a_large_transaction_while_connections_stay_open(app):
    """A retention pass or a migration may write tens of megabytes in one
    transaction; the service's connections stay open for months after."""
    from app.extensions import SQLITE_WAL_SIZE_LIMIT
    from app.models import SessionActivity
    from app.sessions import control
    session_id = control.enqueue().id
    body = "x" * 20_000
    db.session.execute(SessionActivity.__table__.insert(), [
        {"session_id": session_id, "kind": "text", "body": body, "created_at": utcnow()} for _ in range(2000)])
    db.session.commit()
    wal = Path(f"{db.engine.url.database}-wal")
    assert wal.stat().st_size > 2 * SQLITE_WAL_SIZE_LIMIT   # some 40 MB
    for _ in range(3):   # checkpointed at the first commit, restarted by the next writer
        db.session.execute(text("UPDATE sessions SET prompt = 'p' WHERE id = :id"), {"id": session_id})
        db.session.commit()
    assert wal.exists() and wal.stat().st_size <= SQLITE_WAL_SIZE_LIMIT


def test_a_relative_sqlite_path_is_one_file_in_the_working_directory_for_every_process(tmp_path, monkeypatch,
                                                                                      fake_cli):
    """Flask-SQLAlchemy would take it from the checkout's instance folder,
    while the dashboard's workers, copy-to and the runner lock took it from
    the working directory: a session queued from the dashboard never ran.
    The CLI's hook and MCP server, which work from CLAUDEOPS_WORKDIR, are
    given the same file, and the same state directory."""
    import json
    from app.sessions import control
    from app.sessions.manager import run_session
    from tests import streamlines as sl
    from tests.conftest import make_app
    monkeypatch.chdir(tmp_path)
    app = make_app(tmp_path, CLAUDEOPS_DATABASE_URL="sqlite:///relative.db", CLAUDEOPS_STATE_DIR="state")
    assert app.config["SQLALCHEMY_DATABASE_URI"] == f"sqlite:///{tmp_path / 'relative.db'}"
    assert "sessions" in sqlite3.connect(tmp_path / "relative.db").execute(
        "SELECT group_concat(name) FROM sqlite_master").fetchone()[0]
    argv_file = fake_cli(sl.steps(sl.init(), sl.result()))
    with app.app_context():
        assert run_session(control.claim(control.enqueue().id)).status == "completed"
    env = json.loads(argv_file.read_text())["env"]
    assert env["CLAUDEOPS_DATABASE_URL"] == f"sqlite:///{tmp_path / 'relative.db'}"
    assert env["CLAUDEOPS_STATE_DIR"] == str(tmp_path / "state")


def test_a_relative_sqlite_path_whose_database_an_earlier_version_kept_in_the_instance_folder_is_refused(
        tmp_path, monkeypatch):
    """Started on a new, empty file in the working directory, the service
    would leave the operator's memories and sessions behind without a word."""
    from app import create_app
    from app.config import ConfigError
    instance = tmp_path / "instance"
    instance.mkdir()
    (instance / "ops.db").write_bytes(b"SQLite format 3\x00")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    from flask import Flask
    monkeypatch.setattr(Flask, "auto_find_instance_path", lambda self: str(instance))
    config = {"CLAUDEOPS_STATE_DIR": str(tmp_path / "state"), "CLAUDEOPS_DATABASE_URL": "sqlite:///ops.db"}
    with pytest.raises(ConfigError) as refused:
        create_app(config)
    assert str(refused.value) == (
        f"CLAUDEOPS_DATABASE_URL=sqlite:///ops.db names {work / 'ops.db'}, taken from the working directory; an "
        f"earlier version kept that database in {instance / 'ops.db'} for some of its processes. Move it to "
        f"{work / 'ops.db'}, or name it by its absolute path (sqlite:///{instance / 'ops.db'}), then start again")
    (instance / "ops.db").rename(work / "ops.db")
    assert create_app(config).config["SQLALCHEMY_DATABASE_URI"] == f"sqlite:///{work / 'ops.db'}"


def test_database_url_setting_wins(tmp_path):
    from tests.conftest import make_app
    (tmp_path / "elsewhere").mkdir()
    url = explicit_database_url(tmp_path / "elsewhere")
    app = make_app(tmp_path, CLAUDEOPS_DATABASE_URL=url)
    assert app.config["SQLALCHEMY_DATABASE_URI"] == url
    engine = create_engine(url)
    try:
        assert "sessions" in inspect(engine).get_table_names()   # migrated there, not in the state directory
    finally:
        engine.dispose()


def test_timestamps_are_utc_in_and_out(app):
    local = datetime(2026, 11, 22, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    session = Session(tier=1, trigger="api", status="queued", created_at=local)
    db.session.add(session)
    db.session.commit()
    stored = db.session.execute(text("SELECT created_at FROM sessions")).scalar()
    assert str(stored).startswith("2026-11-22 10:00:00")
    reloaded = db.session.get(Session, session.id, populate_existing=True)
    assert reloaded.created_at.tzinfo == timezone.utc and reloaded.created_at.hour == 10
    assert isoformat(reloaded.created_at) == "2026-11-22T10:00:00Z"
    assert session.to_dict()["created_at"] == "2026-11-22T10:00:00Z"


@sqlite_only("the text SQLite stores for a timestamp")
@pytest.mark.parametrize("value", [datetime(2026, 11, 22, 2, 20, 53, tzinfo=timezone.utc),
                                   datetime(2026, 11, 22, 2, 20, 53, 7, tzinfo=timezone.utc),
                                   datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-5))),
                                   datetime(2026, 3, 29, 1, 30, tzinfo=timezone(timedelta(hours=2))), None])
def test_bulk_inserts_store_timestamps_as_every_insert_does(app, value):
    from app.timeutil import UTCDateTime
    column_type = Session.__table__.c.created_at.type
    assert isinstance(column_type, UTCDateTime)
    generic = column_type.dialect_impl(db.engine.dialect).bind_processor(db.engine.dialect)
    assert UTCDateTime.sqlite_text(value) == generic(value)
    if value is not None:
        with pytest.raises(ValueError, match="naive"):
            UTCDateTime.sqlite_text(value.replace(tzinfo=None))


def test_naive_datetimes_are_refused(app):
    db.session.add(Session(tier=1, trigger="api", status="queued", created_at=datetime(2026, 1, 1)))
    with pytest.raises(Exception, match="naive datetime"):
        db.session.commit()
    db.session.rollback()
    assert utcnow().tzinfo is timezone.utc


def test_upgrading_a_database_with_data_keeps_every_row_and_link(app):
    """Revisions that rebuild `sessions` (SQLite batch mode) must not cascade
    into the rows that point at it; on PostgreSQL they alter it in place."""
    flask_migrate.downgrade(revision="0003_memories")
    db.session.execute(text(
        "INSERT INTO sessions (id, tier, trigger, status, stop_requested, created_at, is_error) "
        "VALUES (1, 1, 'api', 'completed', FALSE, '2026-11-01 10:00:00', FALSE)"))
    db.session.execute(text(
        "INSERT INTO session_activity (session_id, kind, body, created_at) VALUES (1, 'text', 'hi', '2026-11-01 10:00:00')"))
    db.session.execute(text(
        "INSERT INTO events (session_id, level, message, created_at) VALUES (1, 'info', 'up', '2026-11-01 10:00:00')"))
    db.session.execute(text(
        "INSERT INTO memories (service, category, observation, confidence, active, created_at, updated_at, session_id, tier) "
        "VALUES ('web', 'timing', 'slow', 0.7, TRUE, '2026-11-01 10:00:00', '2026-11-01 10:00:00', 1, 1)"))
    db.session.commit()
    flask_migrate.upgrade(revision="heads")
    db.session.expire_all()
    for table in ("session_activity", "events", "memories"):
        assert db.session.scalars(text(f"SELECT session_id FROM {table}")).all() == [1], table
    if db.engine.dialect.name == "sqlite":   # the revisions turn enforcement off while they run
        with db.engine.connect() as connection:
            assert connection.execute(text("PRAGMA foreign_keys")).scalar() == 1


def _new_memory_id() -> int:
    from plugins.memory import store
    memory = store.create("timing", "jellyfin", "Takes 60s to start after an upgrade")
    db.session.commit()
    return memory.id


MEMORY_ROW = ("INSERT INTO memories (service, category, observation, confidence, active, created_at, updated_at, tier) "
              "VALUES ('web', 'timing', :text, 0.7, TRUE, '2026-11-01 10:00:00', '2026-11-01 10:00:00', 1)")


def test_an_upgrade_never_hands_out_a_deleted_memorys_id_again(app):
    """0006 rebuilds `memories` on SQLite, whose copy restarts the id counter at
    the highest surviving id; the deleted memory's history still names its id."""
    flask_migrate.downgrade(revision="0005_cooldowns")
    for text_ in ("kept", "deleted"):
        db.session.execute(text(MEMORY_ROW), {"text": text_})
    db.session.execute(text("DELETE FROM memories WHERE observation = 'deleted'"))
    db.session.commit()
    flask_migrate.upgrade(revision="heads")
    assert _new_memory_id() == 3


@sqlite_only("the id counter of a table SQLite rebuilt")
def test_the_upgrade_raises_a_counter_an_earlier_rebuild_lowered(app):
    """A database that went through 0006 before it kept the counter: 0012 puts
    it past every id the history names."""
    flask_migrate.downgrade(revision="0011_memory_rejected_index")
    db.session.execute(text(
        "INSERT INTO memories (service, category, observation, confidence, active, created_at, updated_at, tier, "
        "decay_due_at, status) VALUES ('web', 'timing', 'kept', 0.7, TRUE, '2026-11-01 10:00:00', "
        "'2026-11-01 10:00:00', 1, '2026-12-08 10:00:00', 'approved')"))
    db.session.execute(text(
        "INSERT INTO memory_history (memory_id, action, actor, related_memory_id, created_at) "
        "VALUES (5, 'deleted', 'operator', 7, '2026-11-01 10:00:00')"))
    db.session.execute(text("UPDATE sqlite_sequence SET seq = 1 WHERE name = 'memories'"))
    db.session.commit()
    flask_migrate.upgrade(revision="heads")
    assert _new_memory_id() == 8


@sqlite_only("SQLite commits each schema change at once unless told to begin a transaction")
def test_an_upgrade_that_fails_part_way_leaves_the_database_at_its_revision_to_upgrade_again(app):
    """The disk fills up while 0013 indexes the memories' words: nothing of
    the revisions that did not finish is left behind (their tables,
    triggers, indexes), so the upgrade runs again once there is room."""
    flask_migrate.downgrade(revision="0012_memory_contradicts_index")
    _new_memory_id()

    def disk_full(_connection, _cursor, statement, *_args):
        if "memories_words_fts(memories_words_fts) VALUES ('rebuild')" in statement:
            raise sqlite3.OperationalError("database or disk is full")

    event.listen(db.engine, "before_cursor_execute", disk_full)
    try:
        with pytest.raises(DBAPIError, match="disk is full"):
            flask_migrate.upgrade(revision="heads")
    finally:
        event.remove(db.engine, "before_cursor_execute", disk_full)
    assert db.session.scalar(text("SELECT version_num FROM alembic_version")) == "0012_memory_contradicts_index"
    assert db.session.scalar(text("SELECT count(*) FROM sqlite_master WHERE name LIKE 'memories_words_fts%'")) == 0
    db.session.rollback()
    flask_migrate.upgrade(revision="heads")
    flask_migrate.check()
    search._fts5_index.clear()
    assert [m.observation for m in db.session.scalars(memory_query(q="jelly"))] == ["Takes 60s to start after an upgrade"]


# Rows the service never deletes: a foreign key to them is never followed by a delete.
NEVER_DELETED = {"sessions"}


def test_every_foreign_key_a_delete_follows_is_indexed(app):
    """Deleting a row sets or deletes the rows that point at it; without an
    index on the pointing column each delete reads that whole table."""
    inspector = inspect(db.engine)
    unindexed = []
    for table in inspector.get_table_names():
        leading = {tuple(index["column_names"][:1]) for index in inspector.get_indexes(table)}
        leading |= {tuple(inspector.get_pk_constraint(table)["constrained_columns"][:1])}
        for key in inspector.get_foreign_keys(table):
            if key["referred_table"] not in NEVER_DELETED and tuple(key["constrained_columns"][:1]) not in leading:
                unindexed.append(f"{table}.{key['constrained_columns'][0]}")
    assert unindexed == []


def test_a_postgresql_url_without_a_driver_means_psycopg():
    from app.database_url import sqlalchemy_url
    assert sqlalchemy_url("postgresql://ops:pw@db.local/claudeops") == "postgresql+psycopg://ops:pw@db.local/claudeops"
    assert sqlalchemy_url("postgres://ops@db.local:5433/claudeops") == "postgresql+psycopg://ops@db.local:5433/claudeops"
    for unchanged in ("postgresql+psycopg://ops:p%40ss@/claudeops?host=/run/postgresql", "sqlite:////srv/ops/claudeops.db"):
        assert sqlalchemy_url(unchanged) == unchanged


def test_a_database_url_that_cannot_work_stops_the_start_without_showing_the_password(tmp_path, monkeypatch):
    from app import create_app
    from app.config import ConfigError
    with pytest.raises(ConfigError, match="CLAUDEOPS_DATABASE_URL is not a database URL"):
        create_app({"CLAUDEOPS_STATE_DIR": str(tmp_path), "CLAUDEOPS_DATABASE_URL": "ops:hunter2@db.local"})
    monkeypatch.setitem(sys.modules, "psycopg", None)   # as if it were not installed
    with pytest.raises(ConfigError) as missing:
        create_app({"CLAUDEOPS_STATE_DIR": str(tmp_path), "CLAUDEOPS_DATABASE_URL": "postgresql://ops:hunter2@db.local/x"})
    assert "needs the PostgreSQL driver" in str(missing.value) and "pip install -e '.[postgres]'" in str(missing.value)
    assert "hunter2" not in str(missing.value) and "ops:***@db.local" in str(missing.value)


@pytest.mark.parametrize("url, message", [
    ("bogus://ops:hunter2@db.local/x", "=bogus://ops:***@db.local/x: Claude Ops works with SQLite and PostgreSQL only"),
    ("mysql://ops:hunter2@db.local/x", "=mysql://ops:***@db.local/x: Claude Ops works with SQLite and PostgreSQL only"),
    ("mysql://ops@db.local/x?password=hunter2", "=mysql://ops@db.local/x?password=***: Claude Ops works with"),
    ("postgresql+nodriver://ops:hunter2@db.local/x", "SQLAlchemy knows no driver 'nodriver' for postgresql"),
    ("postgresql+pg8000://ops:hunter2@db.local/x", "needs the Python module pg8000, which is not installed"),
    ("sqlite+aiosqlite:////srv/ops.db", "aiosqlite is an asyncio driver, which Claude Ops cannot use"),
    ("sqlite://", "=sqlite://: names a SQLite database in memory, which each of the service's processes would have"),
    ("sqlite:///:memory:", "names a SQLite database in memory"),
    ("sqlite:///file:ops?mode=memory&uri=true", "names a SQLite database in memory"),
])
def test_a_database_the_service_cannot_use_is_refused_by_name(tmp_path, monkeypatch, url, message):
    from app import create_app
    from app.config import ConfigError
    monkeypatch.setitem(sys.modules, "pg8000", None)   # as if it were not installed
    with pytest.raises(ConfigError) as refused:
        create_app({"CLAUDEOPS_STATE_DIR": str(tmp_path), "CLAUDEOPS_DATABASE_URL": url})
    assert str(refused.value).startswith("CLAUDEOPS_DATABASE_URL=") and message in str(refused.value)
    assert "sqlite:////path/to/claudeops.db" in str(refused.value) and "hunter2" not in str(refused.value)


def test_the_command_names_a_database_it_cannot_use_without_a_traceback(tmp_path):
    result = subprocess.run([str(Path(sys.executable).with_name("claudeops")), "config"], capture_output=True,
                            text=True, timeout=60, env=dict(os.environ, CLAUDEOPS_STATE_DIR=str(tmp_path),
                                                            CLAUDEOPS_DATABASE_URL="mysql://ops:hunter2@db.local/x"))
    assert result.returncode == 78 and "Traceback" not in result.stderr and "hunter2" not in result.stderr
    assert result.stderr.startswith("Error: invalid configuration: CLAUDEOPS_DATABASE_URL=mysql://ops:***@db.local/x")


@postgres_only("a database server that ends the pool's connections (a restart)")
def test_connections_the_server_ended_are_replaced_unnoticed(app):
    client = app.test_client()
    assert client.get("/api/v1/sessions").status_code == 200     # the pool now holds a connection
    db.session.remove()
    admin = create_engine(explicit_database_url(app.config["CLAUDEOPS_STATE_DIR"]))
    try:
        with admin.begin() as connection:
            ended = connection.execute(text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()")).all()
    finally:
        admin.dispose()
    assert ended   # the app's pooled connection was among them
    assert client.get("/api/v1/sessions").status_code == 200


@postgres_only("a role that may connect to a database but not create tables in it")
@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["scheduler"], ["run"], ["db", "upgrade", "heads"]])
def test_a_role_that_may_not_create_tables_is_one_line_at_start_without_its_password(tmp_path, command):
    url = make_url(explicit_database_url(tmp_path / "state"))
    role = f"claudeops_no_create_{os.getpid()}_{len(command)}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f"CREATE ROLE {role} LOGIN PASSWORD 'hunter2-secret'"))
            connection.execute(text("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
        result = subprocess.run(
            [str(Path(sys.executable).with_name("claudeops")), *command], capture_output=True, text=True, timeout=60,
            env=dict(os.environ, CLAUDEOPS_STATE_DIR=str(tmp_path / "state"),
                     CLAUDEOPS_DATABASE_URL=url.set(username=role, password="hunter2-secret")
                     .render_as_string(hide_password=False)))
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"DROP ROLE IF EXISTS {role}"))
        admin.dispose()
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "hunter2-secret" not in result.stderr, result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert f"role {role!r} may not create tables" in line and "permission denied for schema public" in line
    assert f"GRANT CREATE ON SCHEMA public TO {role}" in line


def test_a_database_server_that_never_answers_stops_the_start_in_seconds(tmp_path):
    """A host that takes the connection and says nothing (or drops every
    packet): libpq alone would wait for it with no end and nothing said."""
    import socket
    import time
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)   # the kernel completes the handshake; nobody ever answers
        url = f"postgresql+psycopg://ops:hunter2-secret@127.0.0.1:{silent.getsockname()[1]}/claudeops"
        started = time.monotonic()
        result = subprocess.run([str(Path(sys.executable).with_name("claudeops")), "scheduler"], capture_output=True,
                                text=True, timeout=60, env=dict(os.environ, CLAUDEOPS_STATE_DIR=str(tmp_path),
                                                                CLAUDEOPS_DATABASE_URL=url))
    assert time.monotonic() - started < 30
    assert result.returncode == 1 and "Traceback" not in result.stderr and "hunter2-secret" not in result.stderr
    assert result.stderr.startswith(f"Error: cannot reach the database "
                                    f"postgresql+psycopg://ops:***@127.0.0.1:{url.rsplit(':', 1)[1]}"), result.stderr
    assert "timeout" in result.stderr


def test_a_connect_timeout_in_the_url_is_kept():
    from app.database_url import engine_options
    assert engine_options("postgresql+psycopg://ops@db.example/x")["connect_args"] == {"connect_timeout": 10}
    assert "connect_args" not in engine_options("postgresql+psycopg://ops@db.example/x?connect_timeout=60")
    assert engine_options("sqlite:////srv/claudeops.db") == {}


@pytest.mark.parametrize("error, invalidated, passes", [
    (psycopg.OperationalError("connection failed: Connection refused"), False, True),   # no SQLSTATE: unreachable
    (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), False, True),
    (psycopg.errors.CannotConnectNow("the database system is starting up"), False, True),
    (psycopg.errors.ConnectionFailure("connection failure"), False, True),
    (psycopg.errors.DiskFull("could not extend file"), False, False),   # stays until an operator acts
    (psycopg.errors.InsufficientPrivilege("permission denied for schema public"), False, False),
    (psycopg.errors.UndefinedTable("relation \"nowhere\" does not exist"), False, False),
    (psycopg.InterfaceError("the connection is closed"), True, True),   # SQLAlchemy saw it drop
    (sqlite3.OperationalError("database is locked"), False, False),     # the busy timeout has been waited out
    (sqlite3.OperationalError("disk I/O error"), True, False),
])
def test_only_a_database_server_that_went_away_is_waited_for(error, invalidated, passes):
    driver_error = sqlite3.Error if isinstance(error, sqlite3.Error) else psycopg.Error
    wrapped = DBAPIError.instance("SELECT 1", {}, error, driver_error, connection_invalidated=invalidated)
    assert dbfaults.passing(wrapped) is passes
    assert dbfaults.passing(error) is False   # a driver's own error, not through SQLAlchemy


def _gone() -> DBAPIError:
    return DBAPIError.instance("SELECT 1", {}, psycopg.errors.AdminShutdown("terminating connection"), psycopg.Error)


def test_waiting_out_a_server_that_went_away_does_the_work_again_from_a_rolled_back_transaction(tmp_path,
                                                                                                  caplog):
    from tests.conftest import make_app
    attempts: list[bool] = []

    def work() -> str:
        attempts.append(db.session().in_transaction())   # what the last attempt began is rolled back first
        db.session.execute(text("SELECT 1"))
        if len(attempts) < 3:
            raise _gone()
        return "done"

    with make_app(tmp_path).app_context():
        assert dbfaults.waiting_out(work, "the work") == "done"
        db.session.remove()
    assert attempts == [False, False, False]
    assert "the work: the database is unavailable (terminating connection); waiting 0.5 s" in caplog.text
    assert "the work: the database is back, and it is done" in caplog.text


def test_waiting_out_raises_any_other_fault_at_once_and_ends_with_the_outage_or_the_service(tmp_path, monkeypatch):
    import threading
    import time
    from tests.conftest import make_app

    def fails_with(error: Exception):
        attempts: list[float] = []

        def work() -> None:
            attempts.append(time.monotonic())
            raise error
        return work, attempts

    with make_app(tmp_path).app_context():
        full, attempts = fails_with(DBAPIError.instance("INSERT", {}, psycopg.errors.DiskFull("disk full"),
                                                        psycopg.Error))
        with pytest.raises(DBAPIError, match="disk full"):
            dbfaults.waiting_out(full, "the work")
        assert len(attempts) == 1   # not waited for: it stays until an operator acts

        monkeypatch.setattr(dbfaults, "OUTAGE_SECONDS", 1.2)   # one pause of 0.5 s, then not the next of 1 s
        away, attempts = fails_with(_gone())
        with pytest.raises(DBAPIError, match="terminating connection"):
            dbfaults.waiting_out(away, "the work")
        assert len(attempts) == 2 and 0.5 <= attempts[1] - attempts[0] < 1.0

        monkeypatch.setattr(dbfaults, "OUTAGE_SECONDS", 60.0)
        stopping = threading.Event()
        threading.Timer(0.7, stopping.set).start()
        away, attempts = fails_with(_gone())
        started = time.monotonic()
        with pytest.raises(DBAPIError, match="terminating connection"):
            dbfaults.waiting_out(away, "the work", stopping)
        assert time.monotonic() - started < 3   # during the second pause, of 1 s
        assert len(attempts) == 2
        db.session.remove()
