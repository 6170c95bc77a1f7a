"""Backing up and restoring the SQLite database.

Copying ``claudeops.db`` with ``cp`` while the service runs can give a file
that lacks what its ``-wal`` file holds, or mixes two moments of it.
``backup`` uses SQLite's online backup instead, which copies one snapshot:
in WAL mode a reader's snapshot blocks no writer, so sessions and the
dashboard go on meanwhile. It copies every page in one step; a backup in
steps starts again whenever another connection writes, which a busy
session does twice a second. The copy is a single file (no ``-wal``),
checked before it takes the name asked for.

``restore`` puts such a copy in the database's place, copied through
SQLite as it was checked (a copy of a state directory may hold part of its
data in a ``-wal`` beside it; on a read-only file system it is read
through a copy of its own, since SQLite cannot make the ``-shm`` it reads a
WAL-mode file with). The current database is kept beside it
(``<name>.before-restore-<time>``, a second name for the same file), its
WAL folded in first; the copy then takes the database's name in one
rename, so that whatever stops the process there is always a whole
database at that name. The replaced database's ``-wal``/``-shm`` are
removed, since SQLite would read them as the restored one's (a ``-wal``
that could not be folded in, of a database SQLite cannot read, is kept
first, beside the kept copy).

PostgreSQL has its own tools (``pg_dump``, ``pg_restore``): both refuse it
with a message that says so.
"""
from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sqlalchemy.engine import Engine

from app.timeutil import utcnow

log = logging.getLogger(__name__)

WAL_FILES = ("-wal", "-shm")
# Files SQLite keeps beside a database and may delete or read as part of it:
# a file put at one of these names is not safe there.
COMPANION_FILES = ("-journal", *WAL_FILES)
# What os.link raises where the file system has no hard links.
_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP)


class BackupError(RuntimeError):
    """A backup or restore that cannot be done; the message says why and what to do."""


@dataclass(frozen=True)
class Copy:
    path: Path
    size: int
    revisions: tuple[str, ...]   # the schema's Alembic revisions (one per branch)


def database_file(engine: Engine) -> Path:
    """The SQLite file behind ``engine``; ``BackupError`` for any other database."""
    if engine.dialect.name != "sqlite":
        raise BackupError(f"the database is {engine.dialect.name}, not SQLite: its own tools back it up and "
                          "restore it (pg_dump -Fc to back it up, pg_restore to bring such a dump back)")
    name = engine.url.database
    if not name or name == ":memory:":
        raise BackupError("the database is in memory: there is no file to back up")
    return Path(name).resolve()


def database_files(engine: Engine) -> set[Path]:
    """The SQLite database's file and the names of those SQLite keeps
    beside it (none for another database): no command may write a file of
    its own there. A backup named ``claudeops.db-journal``, say, would be
    taken for a hot journal at the next open, and deleted."""
    try:
        database = database_file(engine)
    except BackupError:
        return set()
    return {database, *(Path(f"{database}{suffix}") for suffix in COMPANION_FILES)}


def backup(engine: Engine, target: Path) -> Copy:
    """A consistent copy of the database at ``target``, a file that must not exist yet."""
    database = database_file(engine)
    if not database.is_file() or database.stat().st_size == 0:
        # Connecting would create an empty one, and the copy of that fail
        # its check: the likely cause is a state directory other than the
        # service's (one unset in this shell).
        raise BackupError(f"there is no database at {database}: nothing to back up (CLAUDEOPS_STATE_DIR, "
                          "or CLAUDEOPS_DATABASE_URL, must name the service's)")
    if target.expanduser().resolve() in database_files(engine):
        raise BackupError(f"{target} is the database or a name SQLite uses beside it, where a backup would not "
                          "be kept: name another file")
    target = _new_file(target)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    partial.unlink(missing_ok=True)   # by this process's id: left by one killed, which had the same
    _remove_partials_of_ended_backups(target)
    try:
        with engine.connect() as connection:
            revisions = _snapshot(connection.connection.driver_connection, partial, database)
        if not link_into_place(partial, target):
            raise BackupError(f"{target} already exists: name a new file (a backup never overwrites one)")
    finally:
        partial.unlink(missing_ok=True)
    _sync_dir(target.parent)
    return Copy(target, target.stat().st_size, revisions)


def restore(engine: Engine, source: Path, known: Callable[[str], bool],
            disabled: frozenset[str] = frozenset()) -> Path:
    """Put the backup ``source`` in the database's place; returns where the
    database it replaced is kept. ``known`` says whether this version of
    Claude Ops has a schema revision: a backup made by a newer one is
    refused, since its schema could not be migrated, as is one with a
    revision of a plugin CLAUDEOPS_DISABLE_PLUGINS leaves out (``disabled``,
    installed but not loaded: its revisions are not read). The caller holds
    the runner lock and has made sure nothing else has the database open."""
    database = database_file(engine)
    if not source.is_file():
        raise BackupError(f"{source} is not a file")
    if source.expanduser().resolve() in database_files(engine):
        raise BackupError(f"{source} is the database itself (or a name SQLite uses beside it), not a backup of "
                          "it: name the backup file to restore")
    # The index and the empty log SQLite makes beside a backup in WAL mode
    # to read it, left where it found none: the backup's directory stays as
    # it was.
    made_beside = [Path(f"{source}{suffix}") for suffix in WAL_FILES if not Path(f"{source}{suffix}").exists()]
    checked, scratch = _opened_read_only(source, database.parent)
    try:
        revisions = _checked(checked, source, thorough=True)
        unknown = [revision for revision in revisions if not known(revision)]
        if unknown and disabled:
            raise BackupError(f"{source} is at schema revision {', '.join(unknown)}, which this installation does "
                              "not know. If it is that of a plugin CLAUDEOPS_DISABLE_PLUGINS leaves out "
                              f"({', '.join(sorted(disabled))}): take it out of CLAUDEOPS_DISABLE_PLUGINS for the "
                              "restore, which migrates the backup with its revisions. Otherwise it was made by a "
                              "newer Claude Ops or with a plugin not installed here: install that version, or "
                              "that plugin, then restore")
        if unknown:
            raise BackupError(f"{source} was made by a newer Claude Ops or with a plugin not installed here "
                              f"(schema revision {', '.join(unknown)}): install that version, or that plugin, then "
                              "restore")
        engine.dispose()   # this process's own connections, before the file changes under them
        kept = _unused(database.with_name(f"{database.name}.before-restore-{utcnow():%Y%m%dT%H%M%SZ}"))
        partial = database.with_name(f".{database.name}.restoring-{os.getpid()}")
        # What a restore killed outright left (a whole copy of a backup, and
        # its journal): no other is running, the caller holding the lock.
        for leftover in database.parent.glob(f".{glob.escape(database.name)}.restoring-*"):
            leftover.unlink(missing_ok=True)
        try:
            # Through SQLite, not byte by byte: a database copied with its
            # -wal (a snapshot of the state directory) has part of its data
            # there, which is what was checked and what must be restored.
            _snapshot(checked, partial, source)
            _owned_like(partial, database if database.exists() else database.parent)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    finally:
        checked.close()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        for made in made_beside:
            with contextlib.suppress(OSError):
                # A -wal with something in it is no longer SQLite's to remove (never so, read only).
                if made.name.endswith("-shm") or made.stat().st_size == 0:
                    made.unlink()
    kept_now = False
    try:
        if database.exists():
            _fold_wal(database)
            _keep(database, kept)
            kept_now = True
            _keep_wal(database, kept)
        for suffix in WAL_FILES:   # the replaced database's, if folding left any
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        # One rename: at every instant there is a whole database at the
        # name, the old one or the restored one, whatever stops the process.
        os.replace(partial, database)
    except BaseException:
        partial.unlink(missing_ok=True)
        if kept_now:   # the database never left its name: no copy of it to keep
            kept.unlink(missing_ok=True)
            _return_wal(database, kept)
        raise
    _sync_dir(database.parent)
    return kept


def _opened_read_only(source: Path, scratch_parent: Path) -> tuple[sqlite3.Connection, Path | None]:
    """A read-only connection to the backup ``source``, and the scratch
    directory to remove once it is closed (``None`` if there is none).

    SQLite reads a database whose header says WAL (the service's own file,
    copied as it is or in a snapshot of the state directory) through an
    index it keeps beside it, ``-shm``. Where it can neither find nor make
    one (a read-only file system: a ZFS or LVM snapshot, a backup volume
    mounted read-only) it cannot open the file at all; then the backup and
    its ``-wal`` are read from a private copy in ``scratch_parent``."""
    connection = _connect_read_only(source)
    try:
        connection.execute("PRAGMA schema_version")
        return connection, None
    except sqlite3.DatabaseError as exc:
        if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_CANTOPEN:   # the primary code, whatever the detail
            return connection, None   # not a database, or a damaged one: the check says which
    connection.close()
    scratch = Path(tempfile.mkdtemp(prefix=".restore-reading-", dir=scratch_parent))
    copy = scratch / "backup.db"
    try:
        # Not the -shm: SQLite rebuilds it from the -wal, and an old one could only mislead.
        for suffix in ("", "-wal"):
            original = Path(f"{source}{suffix}")
            if suffix == "" or original.exists():
                shutil.copyfile(original, f"{copy}{suffix}")
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise BackupError(f"cannot read {source} (copied into {scratch_parent} to be read): "
                          f"{exc.strerror or exc}") from None
    return _connect_read_only(copy), scratch


def _connect_read_only(path: Path) -> sqlite3.Connection:
    # As a URI, so that nothing is created or changed; its path quoted: a
    # "#" or "?" in a file name would end it, and SQLite open another file.
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _keep(database: Path, kept: Path) -> None:
    """A second name for the database about to be replaced, which goes on
    under it once the restored one takes its name. Where the file system
    has no hard links, a copy."""
    try:
        os.link(database, kept)
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        shutil.copy2(database, kept)


def _keep_wal(database: Path, kept: Path) -> None:
    """The replaced database's ``-wal``, if folding it in was not possible
    (a database SQLite cannot read), kept beside the copy kept of it, as
    ``<kept>-wal``: it holds the latest writes, which a recovery tool can
    still read with the file, and SQLite reads it with the kept file."""
    wal = Path(f"{database}-wal")
    if wal.exists() and wal.stat().st_size:
        _keep(wal, Path(f"{kept}-wal"))


def _return_wal(database: Path, kept: Path) -> None:
    """The ``-wal`` kept beside ``kept``, given back to the database it was
    taken from, which stays (a restore that failed): its own was removed
    already, and with both gone its latest writes would be lost."""
    kept_wal, wal = Path(f"{kept}-wal"), Path(f"{database}-wal")
    if kept_wal.exists() and not wal.exists():
        os.replace(kept_wal, wal)
    else:   # the database's own is still there: the kept one, a link or a copy of it, is not needed
        kept_wal.unlink(missing_ok=True)


def _owned_like(path: Path, like: Path) -> None:
    """Give ``path`` the owner and group of ``like``. A restore run as root
    (with sudo, the service running as its own user) would otherwise put a
    database in place that the service cannot open, mode 600 and root's."""
    if os.geteuid() != 0:
        return   # only root can give a file away; anyone else makes it their own, as the service would
    wanted = like.stat()
    os.chown(path, wanted.st_uid, wanted.st_gid)


def _unused(path: Path) -> Path:
    """``path``, or with a number after it if that is taken: two restores
    within a second must not put one kept database in place of the other."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}-{number}")
    return candidate


def link_into_place(partial: Path, target: Path) -> bool:
    """Give the finished file ``partial`` the name ``target``, unless a file
    has taken that name meanwhile (False): a hard link fails then, where a
    rename would replace that file. ``partial`` is left for the caller to
    remove."""
    try:
        os.link(partial, target)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        # A file system without hard links (FAT, some network mounts): a
        # rename, which only a file made in the last instant could lose to.
        if target.exists():
            return False
        os.replace(partial, target)
    return True


def _remove_partials_of_ended_backups(target: Path) -> None:
    """The unfinished copies to ``target``'s name that backups killed
    outright (SIGKILL, a timeout, a power cut) left: each a whole database,
    hidden, which no later backup of another process id would ever remove.
    A copy whose process still runs (another backup to the same name) is
    left to it. Those of other names in the directory are named: dated
    names (claudeops-2026-12-01.db) are never used again."""
    for left in target.parent.glob(".*.partial-*"):
        pid = left.name.rpartition("-")[2]
        # Digits only ("²" is a digit to str.isdigit, and no int), and
        # ended: another tool's name ending in a longer number than any
        # process id (a timestamp) is no backup's, and must stop none.
        if not (pid.isascii() and pid.isdigit()) or not _ended(int(pid)):
            continue
        if left.name == f".{target.name}.partial-{pid}":
            left.unlink(missing_ok=True)
        else:   # another name's: the operator's to remove, whose copy it may not be
            log.warning("%s is what a backup to %s left when it was killed; remove it to free its space",
                        left, left.name[1:].rpartition(".partial-")[0])


def _ended(pid: int) -> bool:
    """No process has this id: not one of another user (PermissionError),
    nor an id beyond what the system can give (OverflowError), which no
    backup ever had."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def _new_file(target: Path) -> Path:
    target = target.expanduser().resolve()
    if target.exists():
        raise BackupError(f"{target} already exists: name a new file (a backup never overwrites one)")
    if not target.parent.exists():
        raise BackupError(f"{target.parent} does not exist: make the directory first, or name a file in another")
    if not target.parent.is_dir():
        raise BackupError(f"{target.parent} is not a directory")
    if not os.access(target.parent, os.W_OK):
        raise BackupError(f"{target.parent} cannot be written")
    return target


def _checked(connection: sqlite3.Connection, path: Path, thorough: bool = False) -> tuple[str, ...]:
    """The copy's schema revisions, once SQLite finds the file sound and it
    is a Claude Ops database; ``BackupError`` otherwise. ``thorough``: every
    index is read against its table too (``integrity_check``), as before a
    restore, with the service stopped: ``quick_check`` passes a file whose
    bytes were damaged in a row an index also holds, and the pages would
    count rows the listings do not show."""
    check = "integrity_check(1)" if thorough else "quick_check"
    try:
        verdict = connection.execute(f"PRAGMA {check}").fetchone()[0]
        revisions = tuple(sorted(row[0] for row in connection.execute("SELECT version_num FROM alembic_version")))
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{path} is not a Claude Ops database: {exc}") from None
    if verdict != "ok":
        raise BackupError(f"{path} is damaged (SQLite's {check.split('(')[0]}: {verdict})")
    if not revisions:
        raise BackupError(f"{path} is not a Claude Ops database: it records no schema revision")
    return revisions


def _fold_wal(database: Path) -> None:
    """Leave the database a file of its own: its WAL written into it and
    the journal mode back to DELETE, so the copy kept of it is whole and
    opening it later makes no ``-wal`` of its own. Leaving WAL mode takes
    the database to itself, which it cannot while another process has it
    open: that process would go on writing to the file being replaced.

    One SQLite cannot read (damaged, or not a database) is left as it is:
    that is when a backup is needed most, so it is replaced all the same.
    SQLite cannot say then whether another process has it open; the runner
    lock keeps the service out, and no process can use it meanwhile."""
    connection = sqlite3.connect(database, timeout=5)
    try:
        mode = connection.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
    except sqlite3.OperationalError:   # locked: someone is writing
        mode = None
    except sqlite3.DatabaseError:   # "file is not a database", "database disk image is malformed"
        return
    finally:
        connection.close()
    if mode != "delete":
        raise BackupError(f"{database} is in use by another process: stop every process that uses it "
                          "(the service, a dashboard served elsewhere), then restore")


def _create_private(path: Path) -> None:
    """A new, empty file only its owner can read: a copy of the database
    holds what the state directory (chmod 700) keeps to itself."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _snapshot(source: sqlite3.Connection, target: Path, name: Path) -> tuple[str, ...]:
    """Copy the database ``source`` reads, as of one moment, to the new file
    ``target``; returns its schema revisions once it is checked. A copy that
    fails the check is the database's fault: messages name it (``name``),
    not the copy, which is removed."""
    _create_private(target)
    destination = sqlite3.connect(target)
    try:
        try:
            source.backup(destination)
            destination.execute("PRAGMA journal_mode=DELETE")   # one file, whatever the source's mode
        except sqlite3.OperationalError as exc:   # the copy's disk is full, or fails
            raise BackupError(f"cannot copy {name} into {target.parent}: {exc}") from None
        revisions = _checked(destination, name)
    finally:
        destination.close()
    _sync(target)
    return revisions


def _sync(path: Path) -> None:
    with path.open("rb") as written:
        os.fsync(written.fileno())


def _sync_dir(path: Path) -> None:
    """A rename is durable once its directory is synced."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
