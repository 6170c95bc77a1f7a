"""``claudeops backup`` and ``claudeops restore``: a consistent copy of the
SQLite database while it is written, and a restore that keeps the database
it replaces, refuses what it could not migrate, and never runs beside the
service."""
from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import func, select, text

from app import create_app
from app.backup import BackupError, database_file
from app.cli import main
from app.config import PROJECT_ROOT
from app.extensions import db
from app.sessions.runner_lock import RunnerLock
from app.timeutil import utcnow
from plugins.events.models import Event
from tests.support.database import sqlite_only
from tests.support.faults import bind_read_only, unmount
from tests.support.waiting import wait_for

pytestmark = sqlite_only("backs up the SQLite file; PostgreSQL is backed up with pg_dump")


def add_events(count: int, message: str = "up") -> None:
    db.session.add_all([Event(level="info", service="web", message=message, created_at=utcnow())
                        for _ in range(count)])
    db.session.commit()


def events_in(path: Path) -> int:
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return connection.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        connection.close()


def invoke(app, *args):
    return app.test_cli_runner().invoke(main, list(map(str, args)))


def database(app) -> Path:
    return database_file(db.engine)


def host_head() -> str:
    """The newest revision of the host's own migrations (each is named after its file)."""
    return max(path.stem for path in (PROJECT_ROOT / "migrations" / "versions").glob("0*.py"))


def test_a_backup_is_one_checked_snapshot_taken_while_the_database_is_written(app, tmp_path):
    add_events(2_000)
    db.session.remove()
    stop, written, failed = threading.Event(), [], []
    path = database(app)

    def writer():   # another connection, as the scheduler's sessions would be
        connection = sqlite3.connect(path, timeout=15)
        try:
            while not stop.is_set():
                with connection:
                    connection.execute("INSERT INTO events (level, service, message, created_at) "
                                       "VALUES ('info', 'db', 'x', '2026-11-23 00:00:00.000000')")
                written.append(1)
                stop.wait(0.002)
        except Exception as exc:
            failed.append(exc)
        finally:
            connection.close()

    def wait_for_writes(count: int) -> None:
        wait_for(lambda: len(written) >= count or failed, timeout=10, what=f"{count} writes")
        assert not failed, failed
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        wait_for_writes(20)
        result = invoke(app, "backup", tmp_path / "copy.db")
        wait_for_writes(len(written) + 20)   # the writer goes on after the backup, unhindered
    finally:
        stop.set()
        thread.join()
    assert result.exit_code == 0, result.output
    copy = tmp_path / "copy.db"
    assert result.output.startswith(f"Backed up to {copy} (") and f"schema {host_head()}" in result.output
    assert 2_020 <= events_in(copy) < 2_000 + len(written)
    assert not Path(f"{copy}-wal").exists()   # a file of its own, whatever the source's journal
    assert copy.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []


def test_a_backup_never_overwrites_and_says_why(app, tmp_path):
    existing = tmp_path / "copy.db"
    existing.write_text("keep me")
    refused = invoke(app, "backup", existing)
    assert refused.exit_code == 1
    assert f"Error: {existing} already exists: name a new file" in refused.output
    assert existing.read_text() == "keep me"
    nowhere = invoke(app, "backup", tmp_path / "missing" / "copy.db")
    assert nowhere.exit_code == 1 and f"{tmp_path / 'missing'} does not exist: make the directory first" in nowhere.output


@pytest.mark.parametrize("suffix", ["", "-journal", "-wal", "-shm"])
def test_a_backup_is_never_put_where_sqlite_keeps_its_own_files(app, tmp_path, suffix):
    """SQLite takes a ``claudeops.db-journal`` it finds for a hot journal,
    and deletes it at the next open: a backup there would be gone."""
    add_events(1)
    target = Path(f"{database(app)}{suffix}")
    existed = target.exists()
    refused = invoke(app, "backup", target)
    assert refused.exit_code == 1
    assert f"Error: {target} is the database or a name SQLite uses beside it" in refused.output
    assert target.exists() == existed
    assert events_in(database(app)) == 1


def test_a_backup_loses_to_a_file_that_takes_its_name_while_it_copies(app, tmp_path, monkeypatch):
    """Two backups to one name, started together: the one that finishes
    second refuses and leaves the first one's copy as it is."""
    import app.backup as backup_module
    (tmp_path / "backups").mkdir()
    target = tmp_path / "backups" / "copy.db"
    copy_database = backup_module._snapshot

    def copy_while_another_backup_finishes(source, partial, name):
        revisions = copy_database(source, partial, name)
        target.write_text("the other backup")
        return revisions

    monkeypatch.setattr(backup_module, "_snapshot", copy_while_another_backup_finishes)
    refused = invoke(app, "backup", target)
    assert refused.exit_code == 1
    assert f"Error: {target} already exists: name a new file" in refused.output
    assert target.read_text() == "the other backup"
    assert sorted(path.name for path in target.parent.iterdir()) == ["copy.db"]   # no partial copy left


def test_a_backup_onto_a_file_system_without_hard_links_still_takes_its_name(app, tmp_path, monkeypatch):
    import errno

    def no_hard_links(source, target):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_hard_links)
    add_events(2)
    (tmp_path / "backups").mkdir()
    made = invoke(app, "backup", tmp_path / "backups" / "copy.db")
    assert made.exit_code == 0, made.output
    assert events_in(tmp_path / "backups" / "copy.db") == 2
    assert sorted(path.name for path in (tmp_path / "backups").iterdir()) == ["copy.db"]


def test_a_backup_where_there_is_no_database_says_so_and_creates_none(tmp_path):
    """The state directory unset in the operator's shell: not the service's."""
    state = tmp_path / "elsewhere"
    elsewhere = create_app({"TESTING": True, "CLAUDEOPS_STATE_DIR": str(state), "CLAUDEOPS_DATABASE_URL": "",
                            "CLAUDEOPS_RESULTS_DIR": "", "CLAUDEOPS_WORKDIR": "", "CLAUDEOPS_SECRET_KEY": "k"})
    missing = state / "claudeops.db"
    with elsewhere.app_context():
        refused = invoke(elsewhere, "backup", tmp_path / "copy.db")
        assert refused.exit_code == 1
        assert f"Error: there is no database at {missing}: nothing to back up" in refused.output
        assert "CLAUDEOPS_STATE_DIR" in refused.output
        assert not missing.exists() and not (tmp_path / "copy.db").exists()
        missing.touch()   # an empty one, left by an earlier run
        again = invoke(elsewhere, "backup", tmp_path / "copy.db")
        assert again.exit_code == 1 and f"there is no database at {missing}" in again.output
        db.engine.dispose()


def test_a_backup_of_a_database_without_a_schema_names_the_database(app, tmp_path):
    db.session.execute(db.text("DROP TABLE alembic_version"))
    db.session.commit()
    refused = invoke(app, "backup", tmp_path / "copy.db")
    assert refused.exit_code == 1
    assert f"Error: {database(app)} is not a Claude Ops database" in refused.output
    assert "partial" not in refused.output
    assert list(tmp_path.glob("*copy.db*")) == []


def test_a_backup_its_disk_cannot_hold_says_so_and_leaves_nothing(tmp_path):
    from tests.support.faults import files_of_at_most
    from tests.test_cli import CLAUDEOPS, claudeops_env

    env = claudeops_env(tmp_path)
    subprocess.run([str(CLAUDEOPS), "db", "upgrade", "heads"], env=env, capture_output=True, check=True, timeout=60)
    copy = tmp_path / "copy.db"
    result = subprocess.run([str(CLAUDEOPS), "backup", str(copy)], env=env, capture_output=True, text=True,
                            timeout=60, preexec_fn=files_of_at_most(65536))
    assert result.returncode == 1
    assert f"Error: cannot copy {tmp_path / 'state' / 'claudeops.db'} into {tmp_path}: disk I/O error" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.glob("*copy.db*")) == []


def test_a_backup_of_another_database_says_which_tool_to_use():
    postgres = SimpleNamespace(dialect=SimpleNamespace(name="postgresql"))
    with pytest.raises(BackupError, match="not SQLite: its own tools back it up and restore it .pg_dump -Fc"):
        database_file(postgres)


def test_restore_puts_the_backup_in_place_and_keeps_the_database_it_replaces(app, tmp_path):
    add_events(3, "before the backup")
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    add_events(5, "after the backup")

    restored = invoke(app, "restore", backup)
    assert restored.exit_code == 0, restored.output
    assert "Restored" in restored.output and "migrated it to this version's schema" in restored.output
    [kept] = [p for p in database(app).parent.iterdir() if ".before-restore-" in p.name]
    assert f"The database it replaced is kept as {kept}." in restored.output
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 3
    assert events_in(kept) == 8   # whole, its WAL folded in
    assert not Path(f"{kept}-wal").exists()
    add_events(1)   # the service goes on with the restored database
    assert db.session.scalar(select(func.count()).select_from(Event)) == 4


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_restore_run_as_root_leaves_the_database_to_the_services_user(app, tmp_path):
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    db.engine.dispose()
    service_user = 65534   # nobody: the service runs as a user of its own, the operator uses sudo
    for path in (database(app), database(app).parent):
        os.chown(path, service_user, service_user)
    restored = invoke(app, "restore", backup)
    assert restored.exit_code == 0, restored.output
    owner = database(app).stat()
    assert (owner.st_uid, owner.st_gid) == (service_user, service_user)
    assert owner.st_mode & 0o777 == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_restore_run_as_root_on_a_new_state_directory_leaves_it_all_to_the_services_user(app, tmp_path):
    """Disaster recovery: the service's user has its state directory, the
    service has never run, and the operator restores with sudo. What the
    command made there as root (the scheduler's lock files, the results
    directory, the cookie key) the service could not open: it would refuse
    to start on its own lock file."""
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    service_user = 65534   # nobody
    state = tmp_path / "new-host"
    state.mkdir(mode=0o700)
    os.chown(state, service_user, service_user)
    fresh = create_app({"TESTING": True, "CLAUDEOPS_STATE_DIR": str(state), "CLAUDEOPS_DATABASE_URL": "",
                        "CLAUDEOPS_RESULTS_DIR": "", "CLAUDEOPS_WORKDIR": "", "CLAUDEOPS_SECRET_KEY": ""})
    with fresh.app_context():
        restored = invoke(fresh, "restore", backup)
        db.engine.dispose()
    assert restored.exit_code == 0, restored.output
    made = {path.relative_to(state): path.stat().st_uid for path in state.rglob("*")}
    assert {"claudeops.db", "scheduler.lock", "claudeops.db.scheduler.lock", "results", "secret_key"} \
        <= {str(path) for path in made}
    assert {path: uid for path, uid in made.items() if uid != service_user} == {}


@pytest.mark.skipif(os.geteuid() != 0, reason="only root makes a state directory no one else can open")
def test_a_restore_run_as_root_that_makes_the_state_directory_says_whose_it_must_become(app, tmp_path):
    """A new host with no state directory yet: nothing around it says who
    the service runs as, so what restore makes there stays root's, and the
    service could open none of it. The operator is told to hand it over."""
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    state = tmp_path / "new-host" / "claudeops"
    fresh = create_app({"TESTING": True, "CLAUDEOPS_STATE_DIR": str(state), "CLAUDEOPS_DATABASE_URL": "",
                        "CLAUDEOPS_RESULTS_DIR": "", "CLAUDEOPS_WORKDIR": "", "CLAUDEOPS_SECRET_KEY": ""},
                       make_state=False)
    with fresh.app_context():
        restored = invoke(fresh, "restore", backup)
        db.engine.dispose()
    assert restored.exit_code == 0, restored.output
    assert state.stat().st_uid == 0
    assert (f"The state directory {state} was made by this command, as root, and all in it is root's: give it "
            f"to the service's user (chown -R <user>: {state}) before the service starts.") in restored.output
    with fresh.app_context():
        again = invoke(fresh, "restore", backup)   # on the directory it made: said once, when it made it
        db.engine.dispose()
    assert again.exit_code == 0 and "was made by this command" not in again.output


def test_restore_says_which_database_it_wrote_and_when_there_was_none(app, tmp_path):
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    restored = invoke(app, "restore", backup)
    assert restored.exit_code == 0, restored.output
    assert f"Restored {backup} to {database(app)} and migrated it" in restored.output
    assert "There was no database" not in restored.output
    state = tmp_path / "elsewhere"   # the state directory unset in the operator's shell
    elsewhere = create_app({"TESTING": True, "CLAUDEOPS_STATE_DIR": str(state), "CLAUDEOPS_DATABASE_URL": "",
                            "CLAUDEOPS_RESULTS_DIR": "", "CLAUDEOPS_WORKDIR": "", "CLAUDEOPS_SECRET_KEY": "k"})
    with elsewhere.app_context():
        fresh = invoke(elsewhere, "restore", backup)
        db.engine.dispose()
    assert fresh.exit_code == 0, fresh.output
    assert f"Restored {backup} to {state / 'claudeops.db'}" in fresh.output
    assert f"There was no database at {state / 'claudeops.db'} before." in fresh.output


def test_restore_ends_the_logins_the_backup_brings_back(app, tmp_path):
    """A login ended after the backup was made (a copied cookie logged
    out) is in the backup still: after a restore, everyone logs in again."""
    from app import logins
    from app.models import DashboardLogin
    token = logins.begin(app.permanent_session_lifetime)
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    logins.end(token)
    restored = invoke(app, "restore", backup)
    assert restored.exit_code == 0 and "every dashboard login was ended" in restored.output
    db.session.remove()
    assert not logins.is_current(token)
    assert db.session.scalar(select(func.count()).select_from(DashboardLogin)) == 0


def test_restore_migrates_a_backup_made_by_an_older_version(app, tmp_path):
    backup = tmp_path / "old.db"
    assert invoke(app, "backup", backup).exit_code == 0
    old = sqlite3.connect(backup)
    with old:
        old.execute("DROP TABLE dashboard_logins")
        old.execute("DROP TABLE rate_limit_windows")
        old.execute("ALTER TABLE sessions DROP COLUMN results_dir_id")
        old.execute("ALTER TABLE scheduler_state DROP COLUMN process")
        old.execute("DROP INDEX ix_sessions_ended_at_cost_usd")
        old.execute("DROP INDEX ix_sessions_request_key")
        old.execute("ALTER TABLE sessions DROP COLUMN request_key")
        old.execute("UPDATE alembic_version SET version_num = '0014_retention'")
    old.close()
    assert invoke(app, "restore", backup).exit_code == 0
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(db.metadata.tables["dashboard_logins"])) == 0
    columns = {row[1] for row in db.session.execute(text("PRAGMA table_info(sessions)"))}
    assert "results_dir_id" in columns   # 0016 ran too


def test_restore_refuses_what_it_cannot_use_and_changes_nothing(app, tmp_path):
    add_events(2)
    before = database(app).read_bytes()
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("hello")
    newer = tmp_path / "newer.db"
    assert invoke(app, "backup", newer).exit_code == 0
    with sqlite3.connect(newer) as future:
        future.execute("UPDATE alembic_version SET version_num = '0099_from_the_future'")
    future.close()
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as unrelated:
        unrelated.execute("CREATE TABLE t (x)")
    unrelated.close()
    # An index whose entries no longer match its table's rows: SQLite's quick_check finds nothing wrong.
    damaged = tmp_path / "damaged.db"
    assert invoke(app, "backup", damaged).exit_code == 0
    with sqlite3.connect(damaged) as broken:
        broken.execute("PRAGMA writable_schema=ON")
        broken.execute("UPDATE sqlite_master SET sql = 'CREATE INDEX ix_events_service_id ON events (message, id)' "
                       "WHERE name = 'ix_events_service_id'")
    broken.close()
    with sqlite3.connect(damaged) as broken:
        assert broken.execute("PRAGMA quick_check").fetchone() == ("ok",)
    broken.close()

    for source, message in ((not_a_database, "is not a Claude Ops database"),
                            (other, "is not a Claude Ops database: no such table: alembic_version"),
                            (newer, "was made by a newer Claude Ops or with a plugin not installed here "
                                    "(schema revision 0099_from_the_future): install that version, or that plugin, "
                                    "then restore"),
                            (damaged, "is damaged (SQLite's integrity_check: row 1 missing from index "
                                      "ix_events_service_id)"),
                            (database(app), "is the database itself (or a name SQLite uses beside it), not a "
                                            "backup of it")):
        refused = invoke(app, "restore", source)
        assert refused.exit_code == 1 and message in refused.output, refused.output
    assert invoke(app, "restore", tmp_path / "missing.db").exit_code == 2   # click: no such file
    assert [p.name for p in database(app).parent.iterdir() if "restor" in p.name] == []
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 2
    assert database(app).read_bytes()[:100] == before[:100]


def test_restore_refuses_while_the_service_runs(app, tmp_path):
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    add_events(1)
    scheduler = RunnerLock(app.config["CLAUDEOPS_STATE_DIR"], app.config["SQLALCHEMY_DATABASE_URI"])
    scheduler.acquire()
    try:
        refused = invoke(app, "restore", backup)
    finally:
        scheduler.release()
    assert refused.exit_code == 1 and refused.output.rstrip().endswith("stop it first, then restore"), refused.output
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 1


def test_restore_refuses_while_another_process_has_the_database_open(app, tmp_path):
    """A dashboard served elsewhere from the same file holds no runner lock,
    but it holds the database open: replaced under it, it would write on
    into the file set aside."""
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    add_events(1)
    db.session.remove()
    dashboard = sqlite3.connect(database(app))
    dashboard.execute("SELECT count(*) FROM events").fetchone()   # open, idle, as a worker's pool keeps it
    try:
        refused = invoke(app, "restore", backup)
    finally:
        dashboard.close()
    assert refused.exit_code == 1 and "is in use by another process" in refused.output, refused.output
    assert [p.name for p in database(app).parent.iterdir() if "restor" in p.name] == []
    assert db.session.scalar(select(func.count()).select_from(Event)) == 1


def test_two_restores_within_a_second_keep_both_databases_they_replaced(app, tmp_path, monkeypatch):
    from app import backup as backup_module
    moment = utcnow()
    monkeypatch.setattr(backup_module, "utcnow", lambda: moment)
    add_events(1, "first")
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    add_events(1, "second")
    assert invoke(app, "restore", backup).exit_code == 0
    assert invoke(app, "restore", backup).exit_code == 0
    first = database(app).with_name(f"claudeops.db.before-restore-{moment:%Y%m%dT%H%M%SZ}")
    second = first.with_name(first.name + "-2")
    assert sorted(p for p in database(app).parent.iterdir() if ".before-restore-" in p.name) == [first, second]
    assert (events_in(first), events_in(second)) == (2, 1)   # the database before, then the first restore


def test_restore_takes_a_backup_whatever_its_name(app, tmp_path):
    add_events(2, "before the backup")
    backup = tmp_path / "claudeops #2 100%?.db"
    assert invoke(app, "backup", backup).exit_code == 0
    add_events(1, "after the backup")
    restored = invoke(app, "restore", backup)
    assert restored.exit_code == 0, restored.output
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [backup.name, "state"]   # no file made beside it


def test_restore_leaves_nothing_beside_a_copy_of_a_wal_mode_database_without_its_wal(app, tmp_path):
    """The database file copied alone with the service stopped (it leaves
    no -wal then): SQLite makes a -wal and -shm beside it to read it."""
    add_events(2, "in the database file")
    db.session.remove()
    db.engine.dispose()
    copied = tmp_path / "copied" / "claudeops.db"
    copied.parent.mkdir()
    shutil.copy(database(app), copied)
    with open(copied, "rb") as header:
        assert header.read(20)[18:20] == b"\x02\x02"   # WAL mode, as the service left it
    restored = invoke(app, "restore", copied)
    assert restored.exit_code == 0, restored.output
    assert [path.name for path in copied.parent.iterdir()] == ["claudeops.db"]
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 2


def test_restore_takes_in_what_the_backups_wal_file_holds(app, tmp_path):
    """A snapshot of the state directory taken while the service ran (a
    file system snapshot, a copy of the whole directory) holds the database
    with its -wal: what is in the -wal is part of it."""
    add_events(1, "in the database file")
    db.session.remove()
    writer = sqlite3.connect(database(app))
    writer.execute("PRAGMA wal_autocheckpoint=0")   # what follows stays in the -wal
    with writer:
        writer.executemany("INSERT INTO events (level, service, message, created_at) "
                           "VALUES ('info', 'db', 'in the wal', '2026-11-23 00:00:00')", [()] * 5)
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    for suffix in ("", "-wal"):
        shutil.copy(f"{database(app)}{suffix}", snapshot / f"claudeops.db{suffix}")
    writer.close()
    add_events(2, "after the snapshot")

    restored = invoke(app, "restore", snapshot / "claudeops.db")
    assert restored.exit_code == 0, restored.output
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 6
    # The index SQLite made to read it is not left in the snapshot.
    assert sorted(path.name for path in snapshot.iterdir()) == ["claudeops.db", "claudeops.db-wal"]


@pytest.mark.parametrize("with_wal", [False, True], ids=["the database file alone", "with its -wal"])
def test_restore_reads_a_wal_mode_copy_on_a_read_only_file_system(app, tmp_path, with_wal):
    """The service's own file, copied as it is or in a snapshot of the
    state directory, says WAL in its header: SQLite reads it through a
    -shm it cannot make on a read-only file system (a ZFS or LVM snapshot,
    a backup volume mounted read-only), where the copy was refused as
    not a Claude Ops database."""
    add_events(2, "in the database file")
    db.session.remove()
    writer = sqlite3.connect(database(app))
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")   # the file holds all so far, its header still WAL
    writer.execute("PRAGMA wal_autocheckpoint=0")   # what follows stays in the -wal
    with writer:
        writer.executemany("INSERT INTO events (level, service, message, created_at) "
                           "VALUES ('info', 'db', 'in the wal', '2026-11-23 00:00:00')", [()] * 3)
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    for suffix in ("", "-wal") if with_wal else ("",):
        shutil.copy(f"{database(app)}{suffix}", snapshot / f"claudeops.db{suffix}")
    writer.close()
    add_events(1, "after the snapshot")
    bind_read_only(snapshot)
    try:
        restored = invoke(app, "restore", snapshot / "claudeops.db")
    finally:
        unmount(snapshot)
    assert restored.exit_code == 0, restored.output
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == (5 if with_wal else 2)
    assert [p.name for p in database(app).parent.iterdir() if "restor" in p.name and "before" not in p.name] == []


def test_a_restore_that_fails_midway_leaves_the_database_where_it_was(app, tmp_path, monkeypatch):
    add_events(2, "before the backup")
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    add_events(1, "after the backup")
    failed = restore_failing_as_the_copy_takes_its_place(app, backup, monkeypatch)
    assert failed.exit_code == 1 and isinstance(failed.exception, OSError)
    assert [p.name for p in database(app).parent.iterdir() if "restor" in p.name] == []
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 3


def test_a_restore_never_leaves_the_database_name_without_a_whole_database(app, tmp_path, monkeypatch):
    """A restore killed between two steps (a crash, a power cut) must not
    leave the name empty: the next start would make a new, empty database
    there. So the restored copy takes the name in one rename, with the
    replaced database linked aside first."""
    add_events(2, "before the backup")
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    add_events(1, "after the backup")
    from app import backup as backup_module
    name = database(app)
    seen = []

    def watching(real):
        def step(*args):
            seen.append((real.__name__, name.is_file() and events_in(name) in (2, 3)))
            return real(*args)
        return step
    monkeypatch.setattr(backup_module.os, "replace", watching(os.replace))
    monkeypatch.setattr(backup_module.os, "link", watching(os.link))
    restored = invoke(app, "restore", backup)
    monkeypatch.undo()
    assert restored.exit_code == 0, restored.output
    assert seen and all(whole for _, whole in seen), seen
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 2
    [kept] = [p for p in name.parent.iterdir() if ".before-restore-" in p.name]
    assert events_in(kept) == 3


def test_what_a_backup_or_restore_killed_outright_left_is_no_obstacle_and_is_removed(app, tmp_path):
    """Killed outright (SIGKILL, a power cut), they leave their unfinished
    copy under a name that holds their process id, which another process
    may have later."""
    add_events(2, "before the backup")
    live = database(app)
    for left in (tmp_path / f".copy.db.partial-{os.getpid()}", live.with_name(f".{live.name}.restoring-{os.getpid()}"),
                 live.with_name(f".{live.name}.restoring-1-journal")):
        left.write_bytes(b"half a copy")
    made = invoke(app, "backup", tmp_path / "copy.db")
    assert made.exit_code == 0, made.output
    restored = invoke(app, "restore", tmp_path / "copy.db")
    assert restored.exit_code == 0, restored.output
    assert not [path.name for path in live.parent.iterdir() if ".restoring-" in path.name]
    assert not [path.name for path in tmp_path.iterdir() if ".partial-" in path.name]


def test_the_unfinished_copy_of_a_backup_killed_outright_is_removed_by_the_next_backup_to_that_name(app, tmp_path,
                                                                                                   caplog):
    """Its name holds the id of a process that has ended; a copy of a backup
    still running (another process, to the same name) is left to it, and
    one to another name is named."""
    add_events(2, "before the backup")
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    left = tmp_path / f".copy.db.partial-{ended.pid}"
    running = tmp_path / f".copy.db.partial-{os.getppid()}"
    other_name = tmp_path / f".other.db.partial-{ended.pid}"
    for path in (left, running, other_name):
        path.write_bytes(b"half a copy")
    with caplog.at_level(logging.WARNING, logger="app.backup"):
        made = invoke(app, "backup", tmp_path / "copy.db")
    assert made.exit_code == 0, made.output
    assert not left.exists()
    assert running.exists() and other_name.exists()
    assert [record.getMessage() for record in caplog.records] == [
        f"{other_name} is what a backup to other.db left when it was killed; remove it to free its space"]


def test_a_file_beside_the_backup_named_like_an_unfinished_copy_but_of_no_process_stops_no_backup(app, tmp_path):
    """Another tool's file whose name ends in a number larger than any
    process id (a timestamp), or in digits that are no number, or that has
    more than a process id after the backup's name: no backup left it, and
    each is left where it is."""
    add_events(2, "before the backup")
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    others = [tmp_path / name for name in (".copy.db.partial-20261201070609123456789", ".copy.db.partial-\u00b2",
                                           ".export.json.partial-99999999999999999999",
                                           f".copy.db.partial-draft-{ended.pid}")]
    for path in others:
        path.write_bytes(b"not ours")
    made = invoke(app, "backup", tmp_path / "copy.db")
    assert made.exit_code == 0, made.output
    assert (tmp_path / "copy.db").is_file() and all(path.exists() for path in others)


def test_a_restore_onto_a_file_system_without_hard_links_keeps_a_copy(app, tmp_path, monkeypatch):
    import errno
    add_events(2, "before the backup")
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    add_events(1, "after the backup")

    def no_hard_links(source, target):
        raise OSError(errno.EPERM, "Operation not permitted")
    monkeypatch.setattr(os, "link", no_hard_links)
    restored = invoke(app, "restore", backup)
    assert restored.exit_code == 0, restored.output
    [kept] = [p for p in database(app).parent.iterdir() if ".before-restore-" in p.name]
    assert events_in(kept) == 3


def test_a_restore_its_migration_fails_on_says_where_the_replaced_database_is(app, tmp_path, monkeypatch):
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    from app import serve

    def failing(_app):
        raise serve.MigrationError("the database could not be migrated (see the error above)")
    monkeypatch.setattr(serve, "apply_migrations", failing)
    failed = invoke(app, "restore", backup)
    [kept] = [p for p in database(app).parent.iterdir() if ".before-restore-" in p.name]
    assert failed.exit_code == 1
    assert ("the database could not be migrated (see the error above)\n"
            f"The backup was restored but not migrated; the database it replaced is kept as {kept}.") \
        in failed.output, failed.output


def test_restore_on_postgresql_says_which_tool_to_use_before_anything_else(tmp_path):
    """Not an error about the server or the service, which an operator
    would fix only to be told then that restore does not do PostgreSQL."""
    backup = tmp_path / "copy.db"
    backup.write_text("a backup")
    app = create_app({"TESTING": True, "CLAUDEOPS_STATE_DIR": str(tmp_path / "state"), "CLAUDEOPS_RESULTS_DIR": "",
                      "CLAUDEOPS_WORKDIR": "", "CLAUDEOPS_SECRET_KEY": "test-secret",
                      "CLAUDEOPS_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nowhere"})   # no server
    refused = invoke(app, "restore", backup)
    assert refused.exit_code == 1
    assert "Error: the database is postgresql, not SQLite: its own tools back it up and restore it (pg_dump -Fc " \
           "to back it up, pg_restore to bring such a dump back)" in refused.output, refused.output


@pytest.mark.parametrize("damage", ["not a database", "cut in half"])
def test_restore_replaces_a_database_sqlite_cannot_read_and_keeps_it_as_it_was(app, tmp_path, damage):
    add_events(2_000, "before the backup")
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    db.session.remove()
    db.engine.dispose()
    live = database(app)
    live.write_bytes(b"garbage" * 1000 if damage == "not a database" else backup.read_bytes()[:300_000])
    damaged = live.read_bytes()
    restored = invoke(app, "restore", backup)
    assert restored.exit_code == 0, restored.output
    [kept] = [p for p in live.parent.iterdir() if ".before-restore-" in p.name]
    assert kept.read_bytes() == damaged
    db.session.remove()
    assert db.session.scalar(select(func.count()).select_from(Event)) == 2_000


def backed_up_then_unreadable_with_writes_in_its_wal(app, tmp_path) -> tuple[Path, Path, bytes]:
    """A backup of three events, then a database SQLite cannot read beside a
    -wal that holds five more: the backup, the database and its -wal's bytes."""
    add_events(3, "before the backup")
    backup = tmp_path / "copy.db"
    assert invoke(app, "backup", backup).exit_code == 0
    db.session.remove()
    db.engine.dispose()
    live = database(app)
    writer = sqlite3.connect(live)
    writer.execute("PRAGMA wal_autocheckpoint=0")   # what follows stays in the -wal
    with writer:
        writer.executemany("INSERT INTO events (level, service, message, created_at) "
                           "VALUES ('info', 'db', 'in the wal', '2026-11-23 00:00:00')", [()] * 5)
    wal = Path(f"{live}-wal").read_bytes()
    assert wal
    copied = tmp_path / "wal-copy"
    shutil.copy(f"{live}-wal", copied)   # the writer's close would fold it in
    writer.close()
    live.write_bytes(b"garbage" * 1000)
    shutil.copy(copied, f"{live}-wal")
    return backup, live, wal


def test_restore_keeps_the_wal_of_a_database_sqlite_cannot_read_beside_the_copy_kept(app, tmp_path):
    """Its -wal holds the latest writes, which folding could not write into
    it: removed, the kept copy would lack them for good."""
    backup, live, wal = backed_up_then_unreadable_with_writes_in_its_wal(app, tmp_path)
    restored = invoke(app, "restore", backup)
    assert restored.exit_code == 0, restored.output
    [kept] = [p for p in live.parent.iterdir() if ".before-restore-" in p.name and not p.name.endswith("-wal")]
    assert Path(f"{kept}-wal").read_bytes() == wal
    db.session.remove()   # the restored database reads none of it
    assert db.session.scalar(select(func.count()).select_from(Event)) == 3


def restore_failing_as_the_copy_takes_its_place(app, backup, monkeypatch):
    """``claudeops restore`` of ``backup`` whose copy cannot be moved into
    the database's place (an I/O error), the database already set aside."""
    from app import backup as backup_module
    replace = os.replace

    def failing(source, target):
        if ".restoring-" in str(source):
            raise OSError(5, "Input/output error")
        replace(source, target)
    monkeypatch.setattr(backup_module.os, "replace", failing)
    try:
        return invoke(app, "restore", backup)
    finally:
        monkeypatch.undo()


def test_a_restore_that_fails_midway_gives_a_database_sqlite_cannot_read_its_wal_back(app, tmp_path, monkeypatch):
    """The -wal, removed from beside the database as the copy was to take
    its name, holds its latest writes: the database stays, and so must it."""
    backup, live, wal = backed_up_then_unreadable_with_writes_in_its_wal(app, tmp_path)
    failed = restore_failing_as_the_copy_takes_its_place(app, backup, monkeypatch)
    assert failed.exit_code == 1 and isinstance(failed.exception, OSError)
    assert live.read_bytes() == b"garbage" * 1000
    assert Path(f"{live}-wal").read_bytes() == wal
    assert [p.name for p in live.parent.iterdir() if "restor" in p.name] == []
