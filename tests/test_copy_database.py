"""``claudeops copy-to``: every row of the service's database into a new one,
SQLite to PostgreSQL (with ``bin/test --postgres``; SQLite to SQLite
otherwise) and back, ids and all; a target that is not new, a source not
migrated, a running scheduler and a row PostgreSQL would refuse are
refused, and a copy that fails leaves the target without a row."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import flask_migrate
import pytest
from sqlalchemy import delete, select, update

from app import copy_cli, create_app, database_copy, runtime
from app.cli import main
from app.database_copy import CopyError, tables_with_rows
from app.extensions import db
from app.models import Session
from app.sessions.runner_lock import RunnerLock
from app.timeutil import utcnow
from plugins.events.models import Event
from plugins.memory.models import Memory
from tests import streamlines as sl
from tests.conftest import make_app
from tests.memory_helpers import add_memory
from tests.support.database import explicit_database_url, postgres_only


def sqlite_source(tmp_path: Path):
    """The service on a SQLite file, whatever database the suite runs on:
    the one operators outgrow."""
    state = tmp_path / "source"
    return make_app(tmp_path, CLAUDEOPS_STATE_DIR=str(state),
                    CLAUDEOPS_DATABASE_URL=f"sqlite:///{state / 'claudeops.db'}")


def new_database(tmp_path: Path, name: str = "target") -> str:
    """A new, empty database: on the suite's PostgreSQL server, or a SQLite file not there yet."""
    (tmp_path / name).mkdir()
    return explicit_database_url(tmp_path / name)


def app_on(tmp_path: Path, url: str, name: str = "target-service"):
    """The service started on ``url`` (migrated: nothing to do at the head)."""
    return make_app(tmp_path, CLAUDEOPS_STATE_DIR=str(tmp_path / name), CLAUDEOPS_DATABASE_URL=url)


def fill(app, fake_cli, run_session_now) -> None:
    """What a service gathers: sessions with their activity, an escalated
    one, events, memories (one contradicting a newer one), their history,
    injections and track records, a cooldown, a runtime setting."""
    with app.app_context():
        runtime.change({"CLAUDEOPS_MEMORY_REVIEW": False})
        older = add_memory("Jellyfin transcodes stall when the cache disk is full", service="jellyfin")
        newer = add_memory("Jellyfin transcodes never stall on a full cache disk", service="jellyfin")
        older.contradicts_id = newer.id   # a reference forward: set once its table is whole
        db.session.commit()
        fake_cli(sl.steps(sl.init(), sl.tool_use("systemctl status postgres"), sl.tool_result("active (running)"),
                          sl.text("[EVENT:warning:postgres] replication lag 40 s\n"
                                  "[MEMORY:timing:postgres] vacuum runs at 03:00 and lags the replicas\n"
                                  f"[OUTCOME:worked:m{older.id}] the cache disk was full\n"
                                  "[COOLDOWN:restart:nginx] success — restarted after 502s"),
                          sl.result("Checked.")))
        first = run_session_now()
        second = run_session_now(tier=2)
        # An escalated session whose parent came after it: also set once its table is whole.
        db.session.execute(update(Session).where(Session.id == first.id).values(parent_id=second.id))
        db.session.commit()


def rows_of(app) -> dict[str, list[tuple]]:
    with app.app_context(), db.engine.connect() as connection:
        return {table.name: [tuple(row) for row in connection.execute(
                    select(table).order_by(*table.primary_key.columns))]
                for table in db.metadata.sorted_tables}


def invoke(app, *args):
    # In its own context: a test's fixtures push another app's.
    with app.app_context():
        return app.test_cli_runner().invoke(main, list(map(str, args)))


def rows_in(app) -> list[str]:
    with app.app_context(), db.engine.connect() as connection:
        return tables_with_rows(connection, db.metadata)


def test_a_copy_holds_every_row_as_it_was_and_the_service_goes_on_there(tmp_path, fake_cli, run_session_now,
                                                                      monkeypatch):
    source = sqlite_source(tmp_path)
    fill(source, fake_cli, run_session_now)
    before = rows_of(source)
    target_url = new_database(tmp_path)
    monkeypatch.setattr(database_copy, "CHUNK_ROWS", 2)   # every table of more than two rows in chunks

    result = invoke(source, "copy-to", target_url)

    assert result.exit_code == 0, result.output
    for table in ("sessions", "session_activity", "events", "memories", "memory_history", "memory_injections",
                  "memory_track_records", "cooldown_actions", "runtime_settings"):
        assert before[table], f"the source holds no {table}: the test copies too little"
    target = app_on(tmp_path, target_url)
    assert rows_of(target) == before
    assert rows_of(source) == before   # the database copied is not changed
    counted = dict(line.split() for line in result.output.splitlines() if line.startswith("  "))
    assert counted == {table: f"{len(rows):,}" for table, rows in before.items()}
    assert f"Copied {sum(map(len, before.values())):,} rows in {len(before)} tables" in result.output
    assert "set CLAUDEOPS_DATABASE_URL to it" in result.output
    assert f"The run logs stay in {source.config['CLAUDEOPS_RESULTS_DIR']};" in result.output
    with target.app_context():
        client = target.test_client()
        # The search index is the target's own (SQLite's FTS tables, PostgreSQL's expression index).
        found = client.get("/api/v1/memories?q=transcodes").get_json()
        assert sorted(memory["id"] for memory in found["memories"]) == sorted(
            row[0] for row in before["memories"] if "transcodes" in row[3])
        # New rows take ids past the copied ones (PostgreSQL's sequences were moved).
        made = client.post("/api/v1/memories", json={"category": "timing", "service": "web",
                                                     "observation": "deploys take four minutes"})
        assert made.status_code == 201, made.get_data(as_text=True)
        assert made.get_json()["id"] == max(row[0] for row in before["memories"]) + 1
        session = Session(tier=1, trigger="api", status="queued")
        db.session.add(session)
        db.session.commit()
        assert session.id == max(row[0] for row in before["sessions"]) + 1


def test_a_copy_goes_back_from_the_suites_database_to_a_sqlite_file(tmp_path, app, fake_cli, run_session_now):
    """On PostgreSQL, the way back; on SQLite, a copy to a second file."""
    fill(app, fake_cli, run_session_now)
    target = tmp_path / "back" / "claudeops.db"
    target.parent.mkdir()
    result = invoke(app, "copy-to", f"sqlite:///{target}")
    assert result.exit_code == 0, result.output
    assert rows_of(app_on(tmp_path, f"sqlite:///{target}")) == rows_of(app)


def test_a_sqlite_copy_not_yet_in_its_file_alone_says_so(tmp_path, fake_cli, run_session_now, monkeypatch):
    """Another process has the new file open (or the disk is full): SQLite
    cannot write its write-ahead log into it, and the file moved alone
    would lack the rows."""
    source = sqlite_source(tmp_path)
    fill(source, fake_cli, run_session_now)
    target = tmp_path / "target.db"
    copy = database_copy.copy_database
    readers = []

    def copied_while_another_process_reads(*args, **kwargs):
        copied = copy(*args, **kwargs)
        reader = sqlite3.connect(target)
        reader.execute("SELECT count(*) FROM sessions").fetchone()   # it has the file open, in WAL mode
        readers.append(reader)
        return copied
    monkeypatch.setattr(copy_cli, "copy_database", copied_while_another_process_reads)
    try:
        result = invoke(source, "copy-to", f"sqlite:///{target}")
    finally:
        for reader in readers:
            reader.close()
    assert result.exit_code == 1, result.output
    assert "but SQLite could not write them from target.db-wal into target.db" in result.output
    assert "the copy is the two files together" in result.output
    assert "PRAGMA wal_checkpoint(TRUNCATE)" in result.output


def test_a_copy_made_on_a_host_without_run_logs_says_they_are_where_the_sessions_ran(tmp_path, fake_cli,
                                                                                run_session_now):
    """A dashboard's host (its own state directory, the one database): the run
    logs are in the scheduler's host's results directory, not in this one's."""
    source = sqlite_source(tmp_path)
    fill(source, fake_cli, run_session_now)
    dashboard = make_app(tmp_path, CLAUDEOPS_STATE_DIR=str(tmp_path / "dashboard"),
                         CLAUDEOPS_DATABASE_URL=source.config["CLAUDEOPS_DATABASE_URL"])
    result = invoke(dashboard, "copy-to", new_database(tmp_path))
    assert result.exit_code == 0, result.output
    assert ("The run logs stay in the results directory of the host that ran each session (none are in this "
            "host's); the database copied is unchanged.") in result.output
    assert dashboard.config["CLAUDEOPS_RESULTS_DIR"] not in result.output


def test_a_target_that_is_not_new_is_refused_and_left_as_it_was(tmp_path, fake_cli, run_session_now):
    source = sqlite_source(tmp_path)
    fill(source, fake_cli, run_session_now)
    target_url = new_database(tmp_path)
    used = app_on(tmp_path, target_url)
    with used.app_context():
        add_memory("kept in the target")
    kept = rows_of(used)

    result = invoke(source, "copy-to", target_url)

    assert result.exit_code == 1
    assert "holds rows already (in memories)" in result.output
    assert "copy-to fills only a new, empty database" in result.output
    assert rows_of(used) == kept


def test_a_migrated_target_without_rows_is_new_enough(tmp_path, fake_cli, run_session_now):
    """A database the service was pointed at and started on, once, with nothing recorded."""
    source = sqlite_source(tmp_path)
    fill(source, fake_cli, run_session_now)
    target_url = new_database(tmp_path)
    started_once = app_on(tmp_path, target_url)
    with started_once.app_context():
        db.engine.dispose()   # and stopped: it has the file open no more
    result = invoke(source, "copy-to", target_url)
    assert result.exit_code == 0, result.output
    assert rows_of(app_on(tmp_path, target_url)) == rows_of(source)


def test_another_applications_database_is_refused(tmp_path, app):
    target = tmp_path / "theirs.db"
    with sqlite3.connect(target) as connection:
        connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    result = invoke(app, "copy-to", f"sqlite:///{target}")
    assert result.exit_code == 1
    assert "holds tables that are not Claude Ops' (invoices): give the copy a database of its own" in result.output
    with sqlite3.connect(target) as connection:
        assert [name for (name,) in connection.execute("SELECT name FROM sqlite_master")] == ["invoices"]


def test_a_source_not_at_this_versions_schema_is_refused_before_anything_is_made(tmp_path, app):
    flask_migrate.downgrade(revision="-1")
    target = tmp_path / "new.db"
    result = invoke(app, "copy-to", f"sqlite:///{target}")
    assert result.exit_code == 1
    assert "migrate it first with `claudeops db upgrade heads`" in result.output
    assert not target.exists()


def test_a_database_without_a_schema_is_not_taken_for_the_services(tmp_path):
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    app = create_app({"CLAUDEOPS_STATE_DIR": str(tmp_path / "state"), "CLAUDEOPS_DATABASE_URL": f"sqlite:///{empty}",
                      "CLAUDEOPS_SECRET_KEY": "test-secret"}, make_state=False)
    result = invoke(app, "copy-to", f"sqlite:///{tmp_path / 'new.db'}")
    assert result.exit_code == 1
    assert f"there is no Claude Ops database at sqlite:///{empty}: it holds no schema" in result.output
    assert not (tmp_path / "new.db").exists()


def test_a_copy_is_refused_while_a_scheduler_runs_on_the_database(tmp_path, app):
    scheduler = RunnerLock(app.config["CLAUDEOPS_STATE_DIR"], app.config["SQLALCHEMY_DATABASE_URI"])
    scheduler.acquire()
    try:
        result = invoke(app, "copy-to", f"sqlite:///{tmp_path / 'new.db'}")
    finally:
        scheduler.release()
    assert result.exit_code == 1
    assert "is running sessions on" in result.output and "stop it first, then copy" in result.output
    assert not (tmp_path / "new.db").exists()


def test_target_urls_that_cannot_work_are_named_as_the_target(tmp_path, app):
    for url, said in (("not a url", "TARGET_URL is not a database URL"),
                      ("mysql://ops@db.example/claudeops",
                       "TARGET_URL=mysql://ops@db.example/claudeops: Claude Ops works with SQLite and PostgreSQL only"),
                      (f"sqlite:///{tmp_path / 'nowhere' / 'claudeops.db'}",
                       f"the directory {tmp_path / 'nowhere'} does not exist")):
        result = invoke(app, "copy-to", url)
        assert result.exit_code == 1, url
        assert said in result.output, result.output


def test_the_services_own_database_is_not_a_target(app):
    result = invoke(app, "copy-to", app.config["SQLALCHEMY_DATABASE_URI"])
    assert result.exit_code == 1
    assert "TARGET_URL names the service's own database" in result.output


@pytest.mark.parametrize("suffix", ["-journal", "-wal", "-shm"])
def test_a_file_sqlite_keeps_beside_the_services_database_is_not_a_target(app, suffix):
    if db.engine.dialect.name != "sqlite":
        pytest.skip("the service's database is no file here")
    companion = Path(f"{db.engine.url.database}{suffix}")
    companion.unlink(missing_ok=True)   # the service stopped: none is there
    result = invoke(app, "copy-to", f"sqlite:///{companion}")
    assert result.exit_code == 1
    assert "TARGET_URL names a file SQLite keeps beside the service's database" in result.output, result.output
    assert not companion.exists()


def test_a_copy_that_fails_leaves_the_target_without_a_row(tmp_path, fake_cli, run_session_now, monkeypatch):
    source = sqlite_source(tmp_path)
    fill(source, fake_cli, run_session_now)
    target_url = new_database(tmp_path)

    def fails(target, metadata, copied):
        raise CopyError("events: 3 rows read, but the target holds 2")
    monkeypatch.setattr(database_copy, "_check_counts", fails)

    result = invoke(source, "copy-to", target_url)

    assert result.exit_code == 1
    assert "events: 3 rows read, but the target holds 2" in result.output
    assert "Nothing was copied" in result.output
    assert rows_in(app_on(tmp_path, target_url)) == []


def copy_writing_meanwhile(source, tmp_path: Path, *statements) -> None:
    """``copy_database`` from ``source`` into a new database while another
    connection (a dashboard on another host, say) carries out ``statements``
    in one transaction once the first table is copied."""
    with source.app_context():
        engine = db.engine

    def write_meanwhile(name: str, rows: int) -> None:
        if name == db.metadata.sorted_tables[0].name:
            with engine.begin() as elsewhere:
                for statement in statements:
                    elsewhere.execute(statement)

    target = app_on(tmp_path, new_database(tmp_path))
    with target.app_context(), db.engine.connect() as connection:
        database_copy.copy_database(engine, connection, db.metadata, on_table=write_meanwhile)


def test_rows_added_to_the_source_while_it_is_copied_refuse_the_copy_naming_their_tables(
        tmp_path, app, fake_cli, run_session_now):
    """On the suite's database: SQLite, or PostgreSQL, whose snapshot would
    otherwise hide the new rows without a word."""
    fill(app, fake_cli, run_session_now)
    with pytest.raises(CopyError, match=r"^the database was written while it was copied \(rows added, changed or "
                                        r"deleted in events\).*stop every process that uses it"):
        copy_writing_meanwhile(app, tmp_path, Event.__table__.insert().values(
            level="info", service="web", message="written meanwhile", created_at=utcnow()))


def test_a_memory_added_and_deleted_again_while_the_source_is_copied_is_seen_by_its_id(
        tmp_path, app, fake_cli, run_session_now):
    """The count is as it was, but the id given is not: the copy's counter
    would give it again."""
    fill(app, fake_cli, run_session_now)
    memories = Memory.__table__
    with pytest.raises(CopyError, match=r"\(rows added, changed or deleted in memories\)"):
        copy_writing_meanwhile(
            app, tmp_path,
            memories.insert().values(category="timing", observation="briefly", created_at=utcnow(),
                                     updated_at=utcnow(), decay_due_at=utcnow()),
            delete(memories).where(memories.c.observation == "briefly"))


def test_a_row_changed_in_a_sqlite_source_while_it_is_copied_refuses_the_copy(tmp_path, fake_cli,
                                                                               run_session_now):
    """SQLite counts every commit of another connection: a change that adds
    no row is seen too."""
    source = sqlite_source(tmp_path)
    fill(source, fake_cli, run_session_now)
    with pytest.raises(CopyError, match=r"^the database was written while it was copied, and the copy would lack"):
        copy_writing_meanwhile(source, tmp_path, update(Memory.__table__).values(observation="changed meanwhile"))


def test_a_row_changed_while_the_source_is_copied_refuses_the_copy(tmp_path, app, fake_cli, run_session_now):
    """On the suite's database: a change that adds no row (an operator's
    edit on a dashboard left running) is seen by SQLite's count of commits,
    and on PostgreSQL by the table's contents, which it names."""
    fill(app, fake_cli, run_session_now)
    with app.app_context():
        postgres = db.engine.dialect.name == "postgresql"
        memory_id = db.session.scalar(select(Memory.id).limit(1))
    named = r" \(rows added, changed or deleted in memories\)" if postgres else ""
    with pytest.raises(CopyError, match=rf"^the database was written while it was copied{named}, and the copy"):
        copy_writing_meanwhile(app, tmp_path, update(Memory.__table__).where(Memory.id == memory_id)
                               .values(confidence=0.31))


def test_a_copy_that_fails_is_told_by_its_own_error_not_by_the_check_for_writes(tmp_path, monkeypatch):
    source = sqlite_source(tmp_path)
    asked = []

    def data_version(snapshot):
        asked.append(1)
        if len(asked) > 1:
            raise AssertionError("the snapshot was asked again after the copy failed")
        return 1

    def fails(self):
        raise CopyError("events, the rows #1 to #2: FOREIGN KEY constraint failed")
    monkeypatch.setattr(database_copy._Snapshot, "_data_version", data_version)
    monkeypatch.setattr(database_copy._TableCopy, "run", fails)
    with pytest.raises(CopyError, match="FOREIGN KEY constraint failed"):
        copy_writing_meanwhile(source, tmp_path)
    assert len(asked) == 1


def test_the_cli_says_nothing_was_copied_when_the_source_was_written_meanwhile(tmp_path, fake_cli, run_session_now,
                                                                                monkeypatch):
    source = sqlite_source(tmp_path)
    fill(source, fake_cli, run_session_now)
    target_url = new_database(tmp_path)
    copy_table = database_copy._TableCopy.run

    def run_then_write(self):
        count = copy_table(self)
        if self.table.name == "events":
            with sqlite3.connect(tmp_path / "source" / "claudeops.db") as elsewhere:
                elsewhere.execute("DELETE FROM events WHERE id = (SELECT min(id) FROM events)")
        return count
    monkeypatch.setattr(database_copy._TableCopy, "run", run_then_write)

    result = invoke(source, "copy-to", target_url)

    assert result.exit_code == 1
    assert "the database was written while it was copied (rows added, changed or deleted in events)" in result.output
    assert "Nothing was copied" in result.output
    assert rows_in(app_on(tmp_path, target_url)) == []


def write_past_every_listener(tmp_path: Path, *statements: tuple) -> None:
    """Into the SQLite source, as an older version (or sqlite3 by hand) could have."""
    with sqlite3.connect(tmp_path / "source" / "claudeops.db") as connection:
        for statement in statements:
            connection.execute(*statement)


@postgres_only("PostgreSQL refuses what SQLite keeps")
def test_rows_postgresql_would_refuse_are_each_named_and_nothing_is_copied(tmp_path):
    source = sqlite_source(tmp_path)
    with source.app_context():
        add_memory("fine")
        db.session.add(Event(level="info", service="web", message="up", created_at=utcnow()))
        db.session.add(Session(tier=1, trigger="api", status="completed"))
        db.session.commit()
        event_id, session_id = db.session.scalar(select(Event.id)), db.session.scalar(select(Session.id))
        limit = Event.__table__.c.service.type.length
    write_past_every_listener(tmp_path, ("UPDATE events SET service = ? WHERE id = ?", ("x" * 500, event_id)),
                              ("UPDATE sessions SET duration_ms = ? WHERE id = ?", (2**31, session_id)))
    target_url = new_database(tmp_path)

    result = invoke(source, "copy-to", target_url)

    assert result.exit_code == 1, result.output
    assert "2 row(s) cannot go to postgresql" in result.output
    assert f"events #{event_id}: service is 500 characters long, over the column's {limit}" in result.output
    assert (f"sessions #{session_id}: duration_ms is 2,147,483,648, beyond the column's range "
            "(-2,147,483,648 to 2,147,483,647)") in result.output
    assert "Nothing was copied" in result.output
    assert rows_in(app_on(tmp_path, target_url)) == []


def test_a_nul_character_is_replaced_as_the_service_replaces_it_and_its_row_named(tmp_path):
    source = sqlite_source(tmp_path)
    with source.app_context():
        memory_id = add_memory("a NUL slipped in").id
    write_past_every_listener(tmp_path, ("UPDATE memories SET observation = ? WHERE id = ?", ("a \x00 b", memory_id)))
    target_url = new_database(tmp_path)
    result = invoke(source, "copy-to", target_url)
    assert result.exit_code == 0, result.output
    assert f"replaced with U+FFFD (as the service replaces them in all it writes) in 1 row(s):\n  memories " \
           f"#{memory_id}: observation" in result.output
    target = app_on(tmp_path, target_url)
    with target.app_context():
        assert db.session.scalar(select(Memory.observation)) == "a \ufffd b"


def test_a_row_whose_reference_is_gone_names_its_table_and_nothing_is_copied(tmp_path):
    source = sqlite_source(tmp_path)
    with source.app_context():
        add_memory("kept")
    write_past_every_listener(tmp_path, ("INSERT INTO session_activity (session_id, kind, created_at) "
                                         "VALUES (99, 'text', '2026-11-01 00:00:00.000000')",))
    target_url = new_database(tmp_path)
    result = invoke(source, "copy-to", target_url)
    assert result.exit_code == 1
    assert "session_activity, the rows #1 to #1: " in result.output
    assert "Nothing was copied" in result.output
    assert rows_in(app_on(tmp_path, target_url)) == []


def test_ids_the_source_gave_to_rows_since_deleted_are_not_given_again(tmp_path):
    """A deleted memory's history keeps its id: a new memory with that id
    would show it as its own."""
    source = sqlite_source(tmp_path)
    with source.app_context():
        client = source.test_client()
        made = [client.post("/api/v1/memories", json={"category": "timing", "service": "web",
                                                     "observation": f"fact {n}"}).get_json()["id"] for n in range(3)]
        assert client.delete(f"/api/v1/memories/{made[-1]}").status_code == 200
    target_url = new_database(tmp_path)
    assert invoke(source, "copy-to", target_url).exit_code == 0
    target = app_on(tmp_path, target_url)
    with target.app_context():
        client = target.test_client()
        new = client.post("/api/v1/memories", json={"category": "timing", "service": "web",
                                                    "observation": "made after the move"}).get_json()["id"]
        assert new == made[-1] + 1
        assert [row["action"] for row in client.get(f"/api/v1/memories/{new}/history").get_json()["history"]] \
            == ["created"]
        assert client.delete(f"/api/v1/memories/{new}").status_code == 200
    # And on from there (back to SQLite, on PostgreSQL): its counters' word is kept too.
    onward = f"sqlite:///{tmp_path / 'onward.db'}"
    assert invoke(target, "copy-to", onward).exit_code == 0
    with app_on(tmp_path, onward, "onward-service").app_context() as context:
        made_there = context.app.test_client().post("/api/v1/memories", json={
            "category": "timing", "service": "web", "observation": "made after the second move"}).get_json()["id"]
    assert made_there == new + 1


@postgres_only("the server carries out a COMMIT whose answer is lost")
def test_a_copy_the_server_committed_as_the_connection_went_is_reported_copied(tmp_path, monkeypatch):
    from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg

    from tests.test_faults import server_gone_away
    source = sqlite_source(tmp_path)
    with source.app_context():
        add_memory("kept")
    counted = database_copy._check_counts
    armed = []
    monkeypatch.setattr(database_copy, "_check_counts", lambda *args: (counted(*args), armed.append(True)))
    commit = PGDialect_psycopg.do_commit

    def committed_then_gone(dialect, dbapi_connection):
        commit(dialect, dbapi_connection)
        if armed:
            armed.clear()
            raise server_gone_away()
    monkeypatch.setattr(PGDialect_psycopg, "do_commit", committed_then_gone)
    target_url = new_database(tmp_path)

    result = invoke(source, "copy-to", target_url)

    monkeypatch.setattr(PGDialect_psycopg, "do_commit", commit)
    assert result.exit_code == 0, result.output
    assert "The connection was lost as the copy was committed" in result.output
    assert "but the server had committed it" in result.output and "Copied 1 rows" in result.output
    assert rows_in(app_on(tmp_path, target_url)) == ["memories"]


def test_a_database_migrated_by_a_plugin_not_installed_here_says_so(tmp_path, app):
    with db.engine.begin() as connection:
        connection.exec_driver_sql("INSERT INTO alembic_version (version_num) VALUES ('incidents_0001')")
    result = invoke(app, "copy-to", f"sqlite:///{tmp_path / 'new.db'}")
    assert result.exit_code == 1
    assert "was migrated by code not installed here (revision incidents_0001: a plugin" in result.output
    assert not (tmp_path / "new.db").exists()


def test_a_relative_target_file_is_in_the_working_directory(tmp_path, app, monkeypatch):
    monkeypatch.chdir(tmp_path)
    add_memory("kept")
    previous = os.umask(0o022)   # a root shell's: the new file is the owner's alone all the same
    try:
        result = invoke(app, "copy-to", "sqlite:///moved.db")
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.output
    assert f"to sqlite:///{tmp_path / 'moved.db'}." in result.output
    assert (tmp_path / "moved.db").stat().st_mode & 0o777 == 0o600
    with sqlite3.connect(tmp_path / "moved.db") as connection:
        assert connection.execute("SELECT observation FROM memories").fetchall() == [("kept",)]


def test_a_database_in_memory_is_no_target(app):
    for url in ("sqlite://", "sqlite:///:memory:", "sqlite:///file:moved?mode=memory&uri=true"):
        result = invoke(app, "copy-to", url)
        assert result.exit_code == 1, url
        assert "TARGET_URL names a SQLite database in memory" in result.output


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_copy_made_as_root_leaves_the_new_file_to_the_owner_of_its_directory(tmp_path, app):
    add_memory("kept")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    result = invoke(app, "copy-to", f"sqlite:///{theirs / 'moved.db'}")
    assert result.exit_code == 0, result.output
    assert {path.name: path.stat().st_uid for path in theirs.iterdir()} == {"moved.db": 65534}


def test_a_table_no_installed_plugin_declares_is_named_as_left_out(tmp_path, app):
    with db.engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE incidents (id INTEGER PRIMARY KEY, title TEXT)")
        connection.exec_driver_sql("INSERT INTO incidents (id, title) VALUES (1, 'disk full')")
    target = tmp_path / "new.db"
    result = invoke(app, "copy-to", f"sqlite:///{target}")
    assert result.exit_code == 0, result.output
    assert "Not copied: incidents, which no installed plugin declares" in result.output
    with sqlite3.connect(target) as connection:
        assert not connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'incidents'").fetchall()
