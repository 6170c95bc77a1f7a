"""One process runs sessions: per state directory, and per database.

The scheduler (or a foreground `claudeops run`) takes this lock before it
runs anything; a second one refuses instead of running sessions beside the
first. Two locks make that hold however Claude Ops is deployed:

- a file lock in the state directory, which the kernel drops if its holder
  crashes;
- on PostgreSQL, an advisory lock in the database. Hosts that share one
  database (the dashboard on several machines) share no state directory, so
  only the database can see both. The lock belongs to a dedicated connection
  and ends with it, so a crashed holder releases it just as the kernel
  releases the file lock.

A SQLite database lives in one file on one host, but not necessarily in the
state directory (``CLAUDEOPS_DATABASE_URL`` may name any file): a file lock
beside it covers two state directories sharing it.
"""
from __future__ import annotations

import fcntl
import logging
import os
import socket
import threading
from contextlib import suppress
from pathlib import Path
from typing import Optional

from sqlalchemy import create_engine, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from app import dbfaults
from app.database_url import connect_args, shown_url

log = logging.getLogger(__name__)

# The same key in every Claude Ops process on every host ("clops"). Advisory
# locks are scoped to one database, so services on different databases of
# one server never meet.
ADVISORY_LOCK_KEY = 0x636C6F7073
# How often a holder (the scheduler, `claudeops run`) checks that it still
# holds the database's lock, which ends with its connection (a server
# restart): taken again at once, before a second scheduler could take it.
CHECK_SECONDS = 1.0
# How the holder's connection names itself, so a refused scheduler can say who holds the lock.
APPLICATION_NAME_PREFIX = "claudeops runner"


class RunnerLockError(RuntimeError):
    """The lock cannot be taken; the message says why."""


class SchedulerAlreadyRunning(RunnerLockError):
    """Another process already runs sessions on this state directory or database."""


class RunnerLock:
    def __init__(self, state_dir: Optional[str], database_url: str | URL | None = None):
        """``state_dir`` None: the database's locks alone, for a command that
        reads the database but none of a state directory's files."""
        url = make_url(database_url) if database_url else None
        # What each file lock covers, for the message of a refusal.
        self._paths: dict[Path, str] = {}
        if state_dir is not None:
            self._paths[Path(state_dir) / "scheduler.lock"] = str(Path(state_dir))
        database_file = _sqlite_file(url)
        if database_file is not None:
            self._paths.setdefault(database_file.with_name(database_file.name + ".scheduler.lock"),
                                   f"the database {database_file}")
        self._files: list = []
        self._database = DatabaseLock(url) if url is not None and url.get_backend_name() == "postgresql" else None

    @property
    def files(self) -> tuple[Path, ...]:
        """The lock files it takes (made at the first ``acquire``)."""
        return tuple(self._paths)

    def acquire(self) -> None:
        try:
            for path, covered in self._paths.items():
                self._acquire_file(path, covered)
            if self._database is not None:
                self._database.acquire()
        except BaseException:
            self._release_files()
            raise

    def verify(self) -> bool:
        """Do we still hold it? Only the database's lock can be lost (with its
        connection); it is taken again if no one else has it meanwhile."""
        return self._database.verify() if self._database is not None else True

    def release(self) -> None:
        if self._database is not None:
            self._database.release()
        self._release_files()

    def _acquire_file(self, path: Path, covered: str) -> None:
        try:
            handle = open(path, "a+")
        except OSError as exc:   # a database named in a directory that is not there, or not ours
            raise RunnerLockError(f"cannot make the scheduler's lock file {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise SchedulerAlreadyRunning(
                f"another Claude Ops process (pid {holder}) is running sessions on {covered}; "
                "stop it first") from None
        try:
            handle.truncate(0)
            handle.write(str(os.getpid()))
            handle.flush()
        except OSError as exc:   # the disk is full: the lock is held, but says nothing of who holds it
            with suppress(OSError):   # closing flushes what is buffered again, and fails as the flush did
                handle.close()
            raise RunnerLockError(f"cannot write the scheduler's lock file {path}: {exc.strerror or exc}") from None
        self._files.append(handle)

    def _release_files(self) -> None:
        while self._files:
            self._files.pop().close()


def held(state_dir: Optional[str], database_url: str | URL) -> Optional[bool]:
    """Whether some process holds the runner lock of ``state_dir`` and the
    database, told without taking it (a scheduler starting that moment
    would be refused): PostgreSQL's from ``pg_locks``, the files' from the
    kernel's list of locks (/proc/locks); None where it cannot be told."""
    url = make_url(database_url)
    if url.get_backend_name() == "postgresql":
        from app.extensions import db
        return bool(db.session.scalar(text(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = :high AND objid = :low AND objsubid = 1)"),
            {"high": ADVISORY_LOCK_KEY >> 32, "low": ADVISORY_LOCK_KEY & 0xFFFFFFFF}))
    files = list(RunnerLock(state_dir, url).files)
    try:
        locked = _flock_held_files()
    except OSError:
        return None
    for path in files:
        try:
            if path.stat().st_ino in locked:
                return True
        except FileNotFoundError:
            continue
    return False


def _flock_held_files() -> set[int]:
    """The inodes of the files some process holds a flock on. By inode
    alone: the device the kernel lists is the file system's, which on
    btrfs subvolumes and some overlays is not the one stat gives. (Another
    file system's file of the same inode would be taken for held, which
    errs on the side of a Stop taken as before.)"""
    found = set()
    with open("/proc/locks") as locks:
        for line in locks:
            fields = line.split()
            if len(fields) < 6 or fields[1] != "FLOCK":   # "->" marks one waiting for a lock
                continue
            found.add(int(fields[5].rpartition(":")[2]))
    return found


def _sqlite_file(url: Optional[URL]) -> Optional[Path]:
    """The file of a SQLite database (None for another backend or one in memory)."""
    if url is None or url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).expanduser().resolve()


class DatabaseLock:
    """PostgreSQL's session-level advisory lock on a connection of its own,
    outside the application's pool, held until ``release``."""

    def __init__(self, url: URL):
        self.url = url
        # Autocommit: the lock belongs to the connection, not to a transaction,
        # and a connection left idle in a transaction would hold back vacuum.
        self._engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT",
                                     connect_args={"application_name": holder_name(), **connect_args(url)})
        self._connection: Optional[Connection] = None
        # verify runs on the heartbeat's thread, release on the stopping one:
        # a check in flight must not take the lock again after its release.
        self._guard = threading.Lock()
        self._released = False
        # Set as release begins, so that a check waiting out an outage gives up at once.
        self._releasing = threading.Event()

    def acquire(self) -> None:
        try:
            with self._guard:
                self._released = False
                self._releasing.clear()
                locked = self._try_lock()
        except SQLAlchemyError as exc:   # most often the first thing to meet a server that is down
            raise RunnerLockError(f"cannot reach the database {shown_url(self.url)} (to take the scheduler's "
                                  f"lock there): {_first_line(exc)}") from None
        if not locked:
            raise SchedulerAlreadyRunning(
                f"another Claude Ops scheduler is running sessions on the database {self.url.database!r} "
                f"({self._holder() or 'holder unknown'}); one scheduler runs sessions per database, "
                "whichever host or state directory it is on: stop it first")

    def verify(self) -> bool:
        with self._guard:
            return False if self._released else self._verify()

    def _verify(self) -> bool:
        if self._connection is not None:
            try:
                self._connection.execute(text("SELECT 1"))
                return True
            except SQLAlchemyError as exc:
                log.warning("lost the connection that holds the scheduler's database lock (%s); taking it again",
                            _first_line(exc))
                self._close()
        # A server that went away (restarted) is waited for, the running
        # session with it: the lock is free again once it is back.
        pauses = dbfaults.outage_pauses()
        while True:
            try:
                locked = self._try_lock()
                if locked:   # the warning above, or the one while waiting, has its end said
                    log.info("took the scheduler's database lock again; sessions go on being run from here")
                return locked
            except SQLAlchemyError as exc:
                pause = next(pauses, None) if dbfaults.passing(exc) else None
                if pause is None:
                    log.error("cannot take the scheduler's database lock again: %s", _first_line(exc))
                    return False
                log.warning("cannot take the scheduler's database lock again yet (%s); trying again in %g s",
                            _first_line(exc), pause)
            if self._releasing.wait(pause):
                return False

    def release(self) -> None:
        self._releasing.set()
        with self._guard:
            self._released = True
            self._close()   # ending the connection ends its advisory lock
            self._engine.dispose()

    def _try_lock(self) -> bool:
        connection = self._engine.connect()
        try:
            locked = connection.scalar(text("SELECT pg_try_advisory_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
        except BaseException:
            connection.close()
            raise
        if not locked:
            connection.close()
            return False
        self._connection = connection
        return True

    def _holder(self) -> Optional[str]:
        with self._engine.connect() as connection:
            return connection.scalar(text(
                "SELECT application_name FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name LIKE :prefix AND pid <> pg_backend_pid() "
                "LIMIT 1"), {"prefix": APPLICATION_NAME_PREFIX + "%"})

    def _close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except SQLAlchemyError:
                pass   # already gone; so is the lock
            self._connection = None


def holder_name() -> str:
    """PostgreSQL keeps 63 bytes of it: enough for the host and the pid."""
    return f"{APPLICATION_NAME_PREFIX} on {socket.gethostname()}, pid {os.getpid()}"[:63]


def _first_line(exc: Exception) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
