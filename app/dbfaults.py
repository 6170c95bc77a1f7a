"""Tell a database that cannot store anything (locked past the busy timeout,
disk full, read-only, failing disk, gone) from a mistake in one query, and
say which in words an operator can act on.

The difference matters to whoever catches the error: a plugin's bad query
costs only that plugin's record, but a database that takes no writes must end
the session with a clear reason rather than let it run on recording nothing.
"""
from __future__ import annotations

import itertools
import logging
import sqlite3
import threading
import time
from typing import Callable, Iterator, Optional, TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from app import extensions

log = logging.getLogger(__name__)
T = TypeVar("T")

# SQLite reports storage conditions as OperationalError, exactly like a
# mistake in SQL ("no such table"), so only its message tells them apart.
_SQLITE_STORAGE_FAULTS = (
    ("database is locked", "the database is locked: another connection held it for longer than "
                           "the busy timeout of {busy} s"),
    ("database table is locked", "a database table is locked by another connection"),
    ("database or disk is full", "the disk holding the database is full"),
    ("readonly database", "the database is read-only (is its directory or file system read-only?)"),
    ("disk i/o error", "the disk holding the database reported an I/O error"),
    ("unable to open database file", "the database file cannot be opened (does its directory exist "
                                     "and is it writable?)"),
)


def storage_fault(exc: BaseException) -> Optional[str]:
    """What is wrong with the database if ``exc`` says it cannot store
    anything, else ``None``."""
    if not isinstance(exc, OperationalError):
        return None
    original = exc.orig
    if not isinstance(original, sqlite3.Error):
        # Other drivers raise OperationalError for the server or connection
        # failing; mistakes in SQL are ProgrammingError there.
        return f"the database is unavailable ({_one_line(original)})"
    message = str(original).lower()
    for needle, description in _SQLITE_STORAGE_FAULTS:
        if needle in message:
            busy = f"{extensions.SQLITE_BUSY_TIMEOUT_MS / 1000:g}"
            return f"{description.format(busy=busy)} ({original})"
    return None


# How long a session and the scheduler's lock wait for a database server
# that went away to come back (a restart takes seconds), and the pauses
# between their attempts: growing, then the last over and over.
OUTAGE_SECONDS = 60.0
RETRY_PAUSES = (0.5, 1.0, 2.0, 5.0)


def outage_pauses() -> Iterator[float]:
    """The pause before each attempt while a server is away; none once the
    next would end past OUTAGE_SECONDS from the first."""
    give_up_at = time.monotonic() + OUTAGE_SECONDS
    for attempt in itertools.count():
        pause = RETRY_PAUSES[min(attempt, len(RETRY_PAUSES) - 1)]
        if time.monotonic() + pause > give_up_at:
            return
        yield pause


# PostgreSQL's SQLSTATEs for a server that went away and comes back: a
# connection failure (class 08), and a server shutting down or starting up
# (admin_shutdown, crash_shutdown, cannot_connect_now).
_SERVER_RESTARTING = ("57P01", "57P02", "57P03")


def passing(exc: BaseException) -> bool:
    """Whether ``exc`` is a database server that went away and may well
    come back (a restart, a dropped connection), which is worth waiting
    for; not a fault that stays until an operator acts (a full disk, a
    role's missing privilege) nor SQLite's, which has no server and has
    already waited out its busy timeout."""
    if not isinstance(exc, DBAPIError) or isinstance(exc.orig, sqlite3.Error):
        return False
    if exc.connection_invalidated:   # SQLAlchemy saw the connection drop
        return True
    state = getattr(exc.orig, "sqlstate", None)
    # No SQLSTATE: the client library's own failure to reach the server.
    return isinstance(exc, OperationalError) and (state is None or state.startswith("08")
                                                  or state in _SERVER_RESTARTING)


def waiting_out(work: Callable[[], T], what: str, shutdown: Optional[threading.Event] = None) -> T:
    """``work()``; if the database server went away meanwhile (``passing``),
    ``work()`` again once it is back (``wait_out``). ``work`` must leave the
    database as one call would however often it runs from a rolled-back
    transaction: it writes what it means to have written, and commits.
    ``what`` names the work in the log ("session 7: recording its end")."""
    try:
        return work()
    except SQLAlchemyError as exc:
        if not passing(exc):
            raise
        result = wait_out(exc, work, what, shutdown)
    log.warning("%s: the database is back, and it is done", what)
    return result


def wait_out(gone: SQLAlchemyError, again: Callable[[], T], what: str,
             shutdown: Optional[threading.Event] = None, then: str = "trying again") -> T:
    """After ``gone`` (``passing``): pause, roll the transaction back and
    ``again()``, with the pauses of ``outage_pauses``, until it goes through;
    its result. Raises the last fault if the server is not back within
    OUTAGE_SECONDS or ``shutdown`` is set meanwhile, and any fault that is
    not its absence at once. ``then`` says in the log what is done once the
    pause is over."""
    shutdown = shutdown or threading.Event()
    for pause in outage_pauses():
        log.warning("%s: %s; waiting %g s for it, then %s", what, describe(gone), pause, then)
        if shutdown.wait(pause):
            break   # the service is stopping: no more waiting
        try:
            roll_back()
            return again()
        except SQLAlchemyError as exc:
            if not passing(exc):
                raise
            gone = exc
    else:
        log.error("%s: the database did not come back within %g s", what, OUTAGE_SECONDS)
    raise gone


def roll_back() -> None:
    """The transaction a server that went away took with it, given up; if
    even a rollback fails on what is left of the connection, the connection
    too."""
    try:
        extensions.db.session.rollback()
    except SQLAlchemyError:
        extensions.db.session().invalidate()   # the scoped session proxies no invalidate()


# A table or column this version uses and the database lacks: SQLite's
# words (an INSERT's are its own), then PostgreSQL's (psycopg's
# UndefinedTable, UndefinedColumn).
_SCHEMA_BEHIND = ("no such table", "no such column", "has no column named", "undefinedtable", "undefinedcolumn")


def schema_behind(exc: BaseException) -> Optional[str]:
    """What to do if ``exc`` says the database has not been migrated to
    this version's schema (never migrated, or migrated by an older one)."""
    if not isinstance(exc, SQLAlchemyError) or getattr(exc, "orig", None) is None:
        return None
    original = exc.orig
    words = f"{type(original).__name__} {original}".lower()
    if not any(needle in words for needle in _SCHEMA_BEHIND):
        return None
    reason = str(original).strip().splitlines()[0]
    return (f"the database is not migrated to this version of Claude Ops ({reason}): run "
            "`claudeops db upgrade heads` (`claudeops serve`, `scheduler` and `run` do it when they start)")


# PostgreSQL's SQLSTATE for a privilege the role lacks (psycopg's InsufficientPrivilege).
_INSUFFICIENT_PRIVILEGE = "42501"


def not_permitted(exc: BaseException, role: Optional[str]) -> Optional[str]:
    """What to do if ``exc`` says the database's role lacks a privilege:
    most often, at the first start, to create the tables (the migrations)."""
    original = getattr(exc, "orig", None) if isinstance(exc, SQLAlchemyError) else None
    if getattr(original, "sqlstate", None) != _INSUFFICIENT_PRIVILEGE:
        return None
    reason = str(original).strip().splitlines()[0]
    who = f"role {role!r}" if role else "database role"
    grantee = role or "<role>"
    return (f"the {who} may not create tables in this database, or lacks another privilege ({reason}): the "
            f"migrations create and change the tables, so make the role the database's owner, or run "
            f"GRANT CREATE ON SCHEMA public TO {grantee}")


# SQLite's words for a file it cannot read as a database at all: not one
# (a wrong path, a file overwritten), or one damaged past reading.
_SQLITE_NOT_A_DATABASE = ("file is not a database", "database disk image is malformed")


def unusable(exc: BaseException) -> Optional[str]:
    """What is wrong with the database if ``exc`` says that no command can
    use it (it cannot store anything, or it is not a database), else
    ``None``: a mistake in one query is not the database's fault."""
    fault = storage_fault(exc)
    if fault or not isinstance(exc, SQLAlchemyError) or not isinstance(getattr(exc, "orig", None), sqlite3.Error):
        return fault
    if any(needle in str(exc.orig).lower() for needle in _SQLITE_NOT_A_DATABASE):
        return (f"the file is not a SQLite database, or is damaged ({exc.orig}); `claudeops restore` puts a "
                "backup in its place")
    return None


def describe(exc: BaseException) -> str:
    """One line for a session's status reason or a log message."""
    fault = storage_fault(exc)
    if fault:
        return fault
    if isinstance(exc, SQLAlchemyError) and getattr(exc, "orig", None) is not None:
        return f"a database error: {_one_line(exc.orig)}"
    return f"{type(exc).__name__}: {_one_line(exc)}"


def first_line(exc: BaseException) -> str:
    """The first line of what the driver said (the exception's own words
    when there is no driver error): the reason, without libpq's hints."""
    message = str(getattr(exc, "orig", None) or exc).strip()
    return message.splitlines()[0] if message else type(exc).__name__


def _one_line(error: BaseException) -> str:
    """A driver's message on one line: libpq adds hints on lines of their
    own ("\n\tIs the server running on that host…"), which would split a
    log line and a session's status reason."""
    return " ".join(str(error).split())
