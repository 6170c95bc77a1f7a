"""``claudeops backup`` and ``claudeops restore`` (app/backup.py does the work)."""
from __future__ import annotations

import os
from pathlib import Path

import click
from flask import current_app
from flask.cli import with_appcontext

from app import logins, state_dir
from app.backup import BackupError, backup, database_file, restore
from app.extensions import db
from app.retention import human_size
from app.revisions import disabled_installed, known_revision


@click.command("backup")
@click.argument("target", type=click.Path(dir_okay=False, path_type=Path))
@with_appcontext
def backup_command(target: Path):
    """Copy the SQLite database to TARGET, a new file, while the service
    runs: one consistent snapshot (SQLite's online backup), checked before
    it takes its name. Sessions and the dashboard go on meanwhile.

    The run logs (CLAUDEOPS_RESULTS_DIR) are plain files: copy them as they
    are. A PostgreSQL database is backed up with pg_dump instead."""
    try:
        made = backup(db.engine, target)
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"Backed up to {made.path} ({human_size(made.size)}, schema {', '.join(made.revisions)}).")


@click.command("restore")
@click.argument("source", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@with_appcontext
def restore_command(source: Path):
    """Put a backup made by `claudeops backup` in the SQLite database's
    place, then migrate it to this version's schema. The database it
    replaces is kept beside it, as <name>.before-restore-<time>.

    Stop the service first (it refuses while `claudeops serve` or
    `claudeops scheduler` runs on this database), and any dashboard served
    elsewhere from the same file: a process that still has the database open
    would go on writing to the one replaced."""
    from app.serve import MigrationError, apply_migrations
    from app.sessions.runner_lock import RunnerLock
    app = current_app._get_current_object()
    made_by_root = os.geteuid() == 0 and not Path(app.config["CLAUDEOPS_STATE_DIR"]).exists()
    try:
        # Before the lock: on PostgreSQL that takes the server, and its
        # refusal (server down, service running) would send the operator
        # to fix what no restore here would follow.
        database = database_file(db.engine)
        # A SQLite database, then: made here, into a new state directory too (as on a new host).
        state_dir.make(app)
    except (BackupError, state_dir.CannotMake) as exc:
        raise click.ClickException(str(exc)) from None
    lock = RunnerLock(app.config["CLAUDEOPS_STATE_DIR"], app.config["SQLALCHEMY_DATABASE_URI"])
    hold_off_the_scheduler(lock, "then restore")
    try:
        kept = restore(db.engine, source, known_revision(app), disabled_installed(app))
        try:
            apply_migrations(app)
        except MigrationError as exc:   # the backup is in place by now: say so, and where the old one is
            replaced = f"; the database it replaced is kept as {kept}" if kept.exists() else ""
            raise click.ClickException(f"{exc}\nThe backup was restored but not migrated{replaced}.") from None
        # The backup's logins include some ended since it was made, a copied cookie's maybe.
        logins.end_all()
    except BackupError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        lock.release()
        leave_to_the_owner_of_their_directory(
            [*lock.files, Path(app.config["CLAUDEOPS_STATE_DIR"]) / "secret_key",
             Path(app.config["CLAUDEOPS_RESULTS_DIR"])])
    click.echo(f"Restored {source.resolve()} to {database} and migrated it to this version's schema; "
               "every dashboard login was ended.")
    if kept.exists():
        click.echo(f"The database it replaced is kept as {kept}.")
    else:   # a state directory other than the service's, maybe: the operator sees which one it was
        click.echo(f"There was no database at {database} before.")
    if made_by_root:
        # No directory around it names the service's user, as one the service's
        # user made does: everything in it stays root's, which the service cannot open.
        state = Path(app.config["CLAUDEOPS_STATE_DIR"])
        click.echo(f"The state directory {state} was made by this command, as root, and all in it is root's: "
                   f"give it to the service's user (chown -R <user>: {state}) before the service starts.")


def hold_off_the_scheduler(lock, then: str) -> None:
    """``lock`` (a RunnerLock) taken for a command that must not run beside
    a scheduler; if one runs, the operator is told to stop it, ``then`` the
    command."""
    from app.sessions.runner_lock import RunnerLockError, SchedulerAlreadyRunning
    try:
        lock.acquire()
    except SchedulerAlreadyRunning as exc:
        raise click.ClickException(f"{exc}, {then}") from None
    except RunnerLockError as exc:
        raise click.ClickException(str(exc)) from None


def leave_to_the_owner_of_their_directory(paths: list[Path]) -> None:
    """Run as root (with sudo) on a state directory the service has not
    used yet (a new host), this command made files there that the service's
    user could not open: the scheduler's lock files, the results directory,
    the cookie key; the service would refuse to start. Each one root owns
    in a directory another user owns is given to that user, as the restored
    database is (app/backup.py)."""
    if os.geteuid() != 0:
        return
    for path in paths:
        try:
            made, directory = path.stat(), path.parent.stat()
        except FileNotFoundError:
            continue
        if made.st_uid == 0 and directory.st_uid != 0:
            os.chown(path, directory.st_uid, directory.st_gid)
