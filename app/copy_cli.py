"""``claudeops copy-to`` (app/database_copy.py does the work)."""
from __future__ import annotations

import os
from pathlib import Path

import click
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from flask import Flask, current_app
from flask.cli import with_appcontext
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import SQLAlchemyError

from app import create_app, state_dir
from app.backup import database_files
from app.backup_cli import hold_off_the_scheduler, leave_to_the_owner_of_their_directory
from app.config import ConfigError
from app.database_copy import CopyError, copy_database, foreign_tables, tables_with_rows
from app.database_url import absolute_sqlite_url, in_memory, shown_url, sqlalchemy_url
from app.dbfaults import first_line
from app.extensions import db
from app.revisions import known_revision
from app.sessions.results_dir import existing_id


@click.command("copy-to")
@click.argument("target_url", metavar="TARGET_URL")
@with_appcontext
def copy_to_command(target_url: str):
    """Copy the service's database, every row of every table, into
    TARGET_URL, a new, empty database, migrated here first: to move from
    SQLite to PostgreSQL when one file is outgrown (or back). Ids stay as
    they are. The database copied is not changed.

    Stop the service first (it refuses while `claudeops serve` or
    `claudeops scheduler` runs on this database), and any dashboard served
    elsewhere from it: anything they write meanwhile undoes the copy, which
    would lack it. Then set
    CLAUDEOPS_DATABASE_URL to TARGET_URL for every process of the service,
    and start it. Run logs stay where they are (CLAUDEOPS_RESULTS_DIR).

    TARGET_URL is postgresql://USER@HOST/DATABASE (a password in ~/.pgpass
    or PGPASSWORD keeps it off the command line) or sqlite:////PATH/TO/FILE.
    A copy that fails leaves it without a row."""
    from app.serve import MigrationError, apply_migrations
    from app.sessions.runner_lock import RunnerLock
    app = current_app._get_current_object()
    try:
        # A relative file, as for CLAUDEOPS_DATABASE_URL: in the working directory.
        target = make_url(absolute_sqlite_url(sqlalchemy_url(target_url, name="TARGET_URL")))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if target.get_backend_name() == "sqlite" and in_memory(target):
        raise click.ClickException("TARGET_URL names a SQLite database in memory, gone when the command ends: "
                                   "name a file (sqlite:////path/to/new.db)")
    shown = shown_url(target)
    source = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    if _same_database(source, target):
        raise click.ClickException(f"TARGET_URL names the service's own database, {shown_url(source)}")
    if target.get_backend_name() == "sqlite" and Path(target.database).expanduser().resolve() in database_files(
            db.engine):
        # The next open of the service's database would take it for its
        # journal or WAL, and delete it (or worse, read it as its own).
        raise click.ClickException(f"TARGET_URL names a file SQLite keeps beside the service's database, {shown}: "
                                   "name another file")
    _check_schema_is_current(app)
    # A scheduler at work would go on writing what the copy no longer reads.
    state = Path(app.config["CLAUDEOPS_STATE_DIR"])
    lock = RunnerLock(str(state) if state.is_dir() else None, source)
    hold_off_the_scheduler(lock, "then copy")
    source_engine = db.engine   # the app context's: the target's app has its own
    target_app = None
    try:
        _made_private(target)
        target_app = _target_app(target)
        _check_new(target_app, shown)
        apply_migrations(target_app)
        click.echo(f"Copying {shown_url(source)} to {shown} …")
        with target_app.app_context(), db.engine.connect() as connection:
            transaction = connection.begin()   # rolled back with the connection, unless committed
            copied = copy_database(source_engine, connection, db.metadata,
                                   on_table=lambda name, rows: click.echo(f"  {name:<24} {rows:>12,}"))
            try:
                transaction.commit()
            except SQLAlchemyError as exc:
                _commit_lost(target_app, shown, exc)
    except MigrationError as exc:
        raise click.ClickException(str(exc)) from None
    except CopyError as exc:
        raise click.ClickException(f"{exc}\nNothing was copied: {shown} holds no row.") from None
    except SQLAlchemyError as exc:   # the target refused a row, or went away
        raise click.ClickException(f"cannot copy to {shown}: {first_line(exc)}\nNothing was copied: a copy that "
                                   "fails leaves the target without a row.") from None
    finally:
        lock.release()
        if target_app is not None:
            with target_app.app_context():
                db.engine.dispose()
        # Run as root (sudo), what it made is the service's user's, as restore leaves it.
        leave_to_the_owner_of_their_directory([*lock.files, *_files_of(target)])
    _check_folded_in(target, shown, copied)
    click.echo(f"Copied {copied.rows:,} rows in {len(copied.tables)} tables to {shown}.")
    if copied.changed.count:
        click.echo(f"NUL characters, which no database of this version holds, were replaced with U+FFFD (as the "
                   f"service replaces them in all it writes) in {copied.changed.count:,} row(s):\n"
                   f"{copied.changed.listed()}")
    if copied.left_out:
        click.echo(f"Not copied: {', '.join(copied.left_out)}, which no installed plugin declares "
                   "(to bring them along, install the plugin that made them and copy again, into a new database).")
    click.echo(f"To use it, set CLAUDEOPS_DATABASE_URL to it for every process of the service and start the "
               f"service. The run logs stay {_where_run_logs_are(app)}; the database copied is unchanged.")


def _where_run_logs_are(app) -> str:
    """This host's results directory, if it ever held a run log; on a host
    that only serves the dashboard, they are where the sessions ran."""
    results_dir = Path(app.config["CLAUDEOPS_RESULTS_DIR"])
    try:
        held_here = existing_id(results_dir) is not None
    except OSError:
        held_here = False
    if held_here:
        return f"in {results_dir}"
    return "in the results directory of the host that ran each session (none are in this host's)"


def _same_database(source: URL, target: URL) -> bool:
    if source.get_backend_name() != target.get_backend_name():
        return False
    if source.get_backend_name() == "sqlite":
        return (bool(source.database) and bool(target.database)
                and Path(source.database).expanduser().resolve() == Path(target.database).expanduser().resolve())
    return (source.host, source.port, source.database) == (target.host, target.port, target.database)


def _check_schema_is_current(app: Flask) -> None:
    """The source at this version's schema: the target is migrated to it,
    and a row of an older schema would not fit."""
    expected = set(ScriptDirectory.from_config(app.extensions["migrate"].migrate.get_config()).get_heads())
    with db.engine.connect() as connection:
        current = set(MigrationContext.configure(connection).get_current_heads())
    known = known_revision(app)
    unknown = sorted(revision for revision in current if not known(revision))
    if unknown:
        raise click.ClickException(
            f"the database {shown_url(db.engine.url)} was migrated by code not installed here (revision "
            f"{', '.join(unknown)}: a plugin, or a newer version of Claude Ops): install it, then copy")
    if not current:
        raise click.ClickException(
            f"there is no Claude Ops database at {shown_url(db.engine.url)}: it holds no schema. Run the command "
            "with the service's settings (CLAUDEOPS_STATE_DIR, or CLAUDEOPS_DATABASE_URL)")
    if current != expected:
        raise click.ClickException(
            f"the database {shown_url(db.engine.url)} is at revision {', '.join(sorted(current)) or 'none'}, "
            f"this version's schema is {', '.join(sorted(expected))}: migrate it first with `claudeops db "
            "upgrade heads` (`claudeops serve` does it when it starts), then copy")


def _made_private(url: URL) -> None:
    """A new SQLite file made the owner's alone before SQLite opens it,
    whatever the umask (a root shell's 022): it will hold every session,
    memory and dashboard login. SQLite gives its -wal and -shm the same mode."""
    if url.get_backend_name() != "sqlite" or in_memory(url):
        return
    try:
        os.close(os.open(Path(url.database).expanduser(), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass   # a target that holds a row already is refused by _check_new
    except OSError:
        pass   # its directory cannot be written: SQLite says so, as before


def _files_of(url: URL) -> list[Path]:
    """The files of a SQLite database (none for a server's)."""
    if url.get_backend_name() != "sqlite" or in_memory(url):
        return []
    path = Path(url.database).expanduser()
    return [path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm"))]


def _commit_lost(target_app: Flask, shown: str, exc: SQLAlchemyError) -> None:
    """The connection lost as the copy was committed: a server may have
    carried the COMMIT out all the same. Its rows tell, the copy being
    committed whole or not at all; if they cannot be read, the operator is
    told how to find out."""
    reason = first_line(exc)
    try:
        with target_app.app_context(), db.engine.connect() as connection:
            committed = bool(tables_with_rows(connection, db.metadata))
    except SQLAlchemyError:
        raise click.ClickException(
            f"the connection to {shown} was lost as the copy was committed ({reason}), and whether the server "
            "committed it cannot be told now: if the target holds any row, it holds the whole copy; if it holds "
            "none, copy again") from None
    if not committed:
        raise click.ClickException(f"cannot copy to {shown}: the commit failed ({reason})\nNothing was copied: "
                                   "a copy that fails leaves the target without a row.")
    click.echo(f"The connection was lost as the copy was committed ({reason}), but the server had committed it.")


def _check_folded_in(target: URL, shown: str, copied) -> None:
    """A SQLite target is one file once its last connection closes, which
    writes the write-ahead log into it; one that could not (a full disk,
    another process that has it open) holds the copy in the two together,
    and the file moved alone would lack nearly every row."""
    if target.get_backend_name() != "sqlite":
        return
    path, wal, _ = _files_of(target)
    if wal.exists() and wal.stat().st_size:
        raise click.ClickException(
            f"Copied {copied.rows:,} rows to {shown}, but SQLite could not write them from {wal.name} into "
            f"{path.name} (a full disk, or another process has it open): the copy is the two files together. "
            f"Keep them together, or free the space, end what has it open, and run "
            f"sqlite3 {path} 'PRAGMA wal_checkpoint(TRUNCATE)' until {wal.name} is empty.")


def _target_app(target: URL) -> Flask:
    """An app on the target, as the service would make it with the same
    settings on that URL: the same plugins, engine options and revisions."""
    database = target.database
    if target.get_backend_name() == "sqlite" and database and not Path(database).expanduser().parent.is_dir():
        raise click.ClickException(f"cannot make {shown_url(target)}: the directory "
                                   f"{Path(database).expanduser().parent} does not exist")
    settings = {name: value for name, value in current_app.config.items() if name.startswith("CLAUDEOPS_")}
    made = create_app({**settings, "CLAUDEOPS_DATABASE_URL": target.render_as_string(hide_password=False)},
                      make_state=False)
    state_dir.may_create_database(made)
    return made


def _check_new(target_app: Flask, shown: str) -> None:
    """The target holds no row, and no table of another application."""
    with target_app.app_context(), db.engine.connect() as connection:
        foreign = foreign_tables(connection, db.metadata)
        if foreign:
            raise click.ClickException(
                f"{shown} holds tables that are not Claude Ops' ({', '.join(foreign[:5])}"
                f"{', …' if len(foreign) > 5 else ''}): give the copy a database of its own")
        full = tables_with_rows(connection, db.metadata)
        if full:
            raise click.ClickException(
                f"{shown} holds rows already (in {', '.join(full)}): copy-to fills only a new, empty database. "
                "Give it a new one (PostgreSQL: CREATE DATABASE … OWNER …; SQLite: a file not there yet)")
