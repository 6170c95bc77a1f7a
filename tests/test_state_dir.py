"""The state directory as the commands that do not make it find it
(app/state_dir.py): a database that is not there is said to be missing; one
that may be there, but not for this user to look at, is left to SQLite."""
from __future__ import annotations

import gc
import weakref
from pathlib import Path

from sqlalchemy import text

from app import create_app
from app.backup import database_file
from app.extensions import db
from tests.conftest import make_app
from tests.support.database import sqlite_only

pytestmark = sqlite_only("only a SQLite database is a file the state directory holds")


def test_a_database_the_user_cannot_look_at_is_opened_not_taken_for_missing(tmp_path, monkeypatch):
    """Another user's state directory (a command run without ``sudo -u``):
    looking for the file there is refused, which says nothing of whether it
    is there. SQLite's own refusal then says why it cannot be opened, where
    the look raised out of the connection as a traceback."""
    service = make_app(tmp_path)
    with service.app_context():
        database = database_file(db.engine)
        db.engine.dispose()
    command = create_app({"TESTING": True, "CLAUDEOPS_STATE_DIR": service.config["CLAUDEOPS_STATE_DIR"],
                          "CLAUDEOPS_DATABASE_URL": service.config["CLAUDEOPS_DATABASE_URL"],
                          "CLAUDEOPS_RESULTS_DIR": "", "CLAUDEOPS_WORKDIR": "", "CLAUDEOPS_SECRET_KEY": "k" * 16},
                         make_state=False)
    real_stat = Path.stat

    def not_ours_to_look_at(path, *args, **kwargs):
        if path == database:
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)
    monkeypatch.setattr(Path, "stat", not_ours_to_look_at)
    with command.app_context():
        assert db.session.scalar(text("SELECT 1")) == 1   # the file is this test's: SQLite opens it
        db.session.remove()
        db.engine.dispose()


def test_a_new_database_and_its_side_files_are_the_owners_only_whatever_the_umask(tmp_path):
    """SQLite creates a database as the umask allows (022: readable by any
    user of the machine) and its -wal and -shm files with the database's
    mode; the memories, events and activity logs are the operator's."""
    import os
    import stat
    old = os.umask(0o022)
    try:
        service = make_app(tmp_path)
        with service.app_context():
            db.session.execute(text("CREATE TABLE IF NOT EXISTS probe (x)"))
            db.session.commit()
            database = database_file(db.engine)
            side_files = [Path(f"{database}{suffix}") for suffix in ("-wal", "-shm")]
            modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in [database, *side_files]
                     if path.exists()}
    finally:
        os.umask(old)
    assert database.name in modes and modes == dict.fromkeys(modes, 0o600)


def test_an_app_let_go_is_freed(tmp_path):
    """Flask-SQLAlchemy keeps an app's engines while the app lives: nothing an
    engine holds may hold the app, or every app made in a process (each
    test's, an embedding program's) would stay until the process ends."""
    app = make_app(tmp_path)
    with app.app_context():
        db.session.execute(text("SELECT 1"))   # the engine made, and its listeners
    freed = weakref.ref(app)
    del app
    gc.collect()
    assert freed() is None
