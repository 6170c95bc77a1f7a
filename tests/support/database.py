"""Which database a test's service uses.

By default every state directory holds its own SQLite file, as in production.
When ``CLAUDEOPS_TEST_POSTGRES_URL`` names a PostgreSQL server (``bin/test
--postgres`` starts a throwaway one and sets it), each state directory gets a
database of its own on that server instead: the same state directory always
means the same database (a "restarted" app finds its data), a different one
means a fresh, empty database. Tests pass the URL to the apps they build and
to the ``claudeops`` processes they start; the databases a test created are
dropped when it ends.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import OperationalError

POSTGRES_ENV = "CLAUDEOPS_TEST_POSTGRES_URL"
DATABASE_PREFIX = "claudeops_test_"

_admin: Engine | None = None
_created: list[str] = []


def server_url() -> str:
    """The PostgreSQL server's maintenance database, or "" on SQLite."""
    return os.environ.get(POSTGRES_ENV, "")


def on_postgres() -> bool:
    return bool(server_url())


def sqlite_only(reason: str):
    """Mark a test that checks something only SQLite has; the reason says what."""
    return pytest.mark.skipif(on_postgres(), reason=f"SQLite only: {reason}")


def postgres_only(reason: str):
    """Mark a test of something only PostgreSQL has; the reason says what."""
    return pytest.mark.skipif(not on_postgres(), reason=f"PostgreSQL only: {reason}")


def database_url(state_dir: Path | str) -> str:
    """The URL for the service whose state directory is ``state_dir``: "" on
    SQLite (the service's default, a file in the state directory), else the
    state directory's own PostgreSQL database, created on first use."""
    if not on_postgres():
        return ""
    name = DATABASE_PREFIX + hashlib.sha256(str(Path(state_dir).resolve()).encode()).hexdigest()[:20]
    if name not in _created:
        with _admin_engine().connect() as connection:
            # A linguistic collation, as on most servers (en_US.UTF-8): code
            # that leaves string order to the database would sort differently
            # from SQLite, and a test should see it.
            # (ICU locales: PostgreSQL 15 or newer.)
            connection.execute(text(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' "
                                    "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'"))
        _created.append(name)
    return make_url(server_url()).set(database=name).render_as_string(hide_password=False)


def explicit_database_url(state_dir: Path | str) -> str:
    """Like ``database_url``, but on SQLite too the URL itself (the file the
    service would use in ``state_dir``), for a test that must name it."""
    return database_url(state_dir) or f"sqlite:///{Path(state_dir) / 'claudeops.db'}"


def database_env(state_dir: Path | str) -> dict[str, str]:
    """Environment for a `claudeops` process on ``state_dir``."""
    url = database_url(state_dir)
    return {"CLAUDEOPS_DATABASE_URL": url} if url else {}


def created_count() -> int:
    return len(_created)


def drop_created_since(count: int) -> None:
    """Drop the databases created after ``created_count()`` was ``count``;
    connections still open to them (an app's pool, a service that outlived
    its test) are ended first."""
    if not on_postgres():
        return
    with _admin_engine().connect() as connection:
        while len(_created) > count:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{_created.pop()}" WITH (FORCE)'))


def _admin_engine() -> Engine:
    global _admin
    if _admin is None:
        # CREATE and DROP DATABASE cannot run inside a transaction; the
        # pre-ping outlives a test's restart of the server (restart_server).
        _admin = create_engine(server_url(), isolation_level="AUTOCOMMIT", pool_size=1, pool_pre_ping=True)
    return _admin


def restartable() -> bool:
    """Whether the server is ``bin/test --postgres``'s own, which a test may
    restart: its data directory lies beside its socket (bin/_postgres)."""
    host = make_url(server_url()).query.get("host") if on_postgres() else None
    return bool(host) and (Path(host) / "data" / "postmaster.pid").exists()


def restarts_the_server(test):
    """Mark a test that restarts the test server: it runs only on
    ``bin/test --postgres``'s own server, and alone (``serial``), so that no
    test running beside it meets the outage."""
    test = pytest.mark.serial(test)
    return pytest.mark.skipif(not restartable(),
                              reason="PostgreSQL only: needs bin/test --postgres's own server to restart")(test)


def restart_server(down_for: float) -> None:
    """Restart the test server as an operator restarts theirs: every
    connection is ended, and for ``down_for`` seconds none is taken."""
    data = Path(make_url(server_url()).query["host"]) / "data"
    # Started again as it was: postmaster.opts holds the running server's command line.
    _program, *options = shlex.split((data / "postmaster.opts").read_text())
    _pg_ctl(data, "--mode=fast", "stop")
    time.sleep(down_for)
    _pg_ctl(data, f"--options={shlex.join(options)}", "start")


def _pg_ctl(data: Path, *args: str) -> None:
    pg_ctl = max(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda path: int(path.parts[-3]))
    # --log: without it the server would write to, and hold open, this call's output.
    argv = [str(pg_ctl), f"--pgdata={data}", f"--log={data.parent / 'server.log'}", "--wait", *args]
    if os.getuid() == 0:   # the cluster belongs to the postgres user (bin/_postgres)
        argv = ["runuser", "-u", "postgres", "--"] + argv
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


def server_answers() -> bool:
    try:
        with _admin_engine().connect() as connection:
            connection.execute(text("SELECT 1"))
        return True
    except OperationalError:
        return False
