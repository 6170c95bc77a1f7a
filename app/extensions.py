"""Flask extensions shared by the host and every plugin.

Plugins define their models on ``db`` (``from app.extensions import db``) so that
one metadata, one migration history and one drift check cover everything.
"""
from __future__ import annotations

import atexit
import ipaddress
import logging
import sqlite3
import weakref

from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect
from sqlalchemy import MetaData, event
from sqlalchemy.engine import Engine

import app.portable_text  # noqa: F401  (its listener keeps NUL characters out of every database)

# Named constraints let Alembic alter and drop them later, SQLite included.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

db = SQLAlchemy(metadata=MetaData(naming_convention=NAMING_CONVENTION))
migrate = Migrate(render_as_batch=True, compare_type=True)
csrf = CSRFProtect()


def client_network() -> str:
    """Whom the login and bearer-token limits count: the client's address;
    for IPv6 its /64, the block one host is given and may rotate its address
    through at will."""
    address = get_remote_address()
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        if ip.ipv4_mapped is not None:   # an IPv4 client seen through a dual-stack socket
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


# Only guesses are limited (logins, bearer tokens: app/auth.py), counted in
# the database every worker shares (create_app sets app/limit_store.py's storage).
limiter = Limiter(key_func=client_network, default_limits=[])

SQLITE_BUSY_TIMEOUT_MS = 15000
# Size the write-ahead log is cut back to once it has been checkpointed. SQLite
# otherwise keeps the file as large as it ever grew while any connection is
# open, and the service's stay open for months: one large transaction (a
# retention pass, a migration at start) would hold its size in the state
# directory until the next restart. Four times the automatic checkpoint's
# mark (1,000 pages, some 4 MB), so that everyday writes, checkpointed at
# that mark, never have the file cut and grown again.
SQLITE_WAL_SIZE_LIMIT = 16 * 1024 * 1024


@event.listens_for(Engine, "connect")
def _tune_sqlite(dbapi_connection, _record) -> None:
    """WAL lets dashboard readers run while the scheduler writes; the busy
    timeout makes writers wait for each other instead of failing; the
    journal size limit keeps the write-ahead log from staying at its largest."""
    if not isinstance(dbapi_connection, sqlite3.Connection):
        return
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA journal_size_limit={SQLITE_WAL_SIZE_LIMIT}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


# Every engine the applications of this process made, disposed of when it
# exits: SQLite folds its write-ahead log back into the database file, and
# removes it, only when the last connection closes, and a connection left in
# a pool at exit is never closed. A -wal file left beside a stopped service's
# database holds rows the file lacks, and is read back into whatever file is
# later copied there (an earlier backup, put back by hand).
_ENGINES: "weakref.WeakSet[Engine]" = weakref.WeakSet()


def dispose_at_exit(engine: Engine) -> None:
    _ENGINES.add(engine)


@atexit.register
def _dispose_engines() -> None:
    for engine in list(_ENGINES):
        try:
            engine.dispose()
        except Exception:   # exiting anyway: a connection that cannot close keeps its log
            logging.getLogger(__name__).debug("could not dispose of %s at exit", engine, exc_info=True)
