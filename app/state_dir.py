"""Who makes the state directory: the service (and the web workers it
starts), and the commands that start it or create its database (``serve``,
``scheduler``, ``run``, ``restore``, ``db upgrade``). Every other command
works on the state directory as it finds it: run with a mistyped
CLAUDEOPS_STATE_DIR, it must say there is no database there, and leave
behind no directory, empty database or cookie key that the next command
would take for the service's."""
from __future__ import annotations

import contextlib
import errno
import os

import secrets
import weakref
from pathlib import Path
from typing import Optional

from flask import Flask
from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url

from app import redaction
from app.database_url import shown_url
from app.state_files import NotText, created_once

# Set on an app once its state directory is made: from then on a SQLite
# database it opens may be created.
MADE = "claudeops.state_dir_made"


class NoDatabase(Exception):
    """A command that may not create the database found none (a SQLite file
    that is not there): ``url``, as it may be shown, and ``why``. Not a
    database error: nothing was opened, and nothing is wrong with any
    database."""

    def __init__(self, url: str, why: str):
        super().__init__(f"there is no Claude Ops database at {url}: {why}")
        self.url, self.why = url, why


class CannotMake(Exception):
    """The state directory, its results directory or the cookie key cannot
    be made; the message says which, why, and which setting chooses it."""


def make(app: Flask) -> None:
    """Make the state and results directories (the service's user's only:
    they hold the database, the run logs and the cookie key) and the cookie
    key, if none is set; ``CannotMake`` if they cannot be."""
    for label, key in (("state directory", "CLAUDEOPS_STATE_DIR"), ("results directory", "CLAUDEOPS_RESULTS_DIR")):
        _make_dir(label, key, Path(app.config[key]))
    if not app.config.get("SECRET_KEY"):
        key_file = _secret_key_file(app.config)
        try:
            app.config["SECRET_KEY"] = created_once(key_file, lambda: secrets.token_hex(32))
        except NotText as exc:
            raise CannotMake(f"cannot read the cookie key {key_file}: {exc.strerror}") from None
        except OSError as exc:   # named by the key, not by the draft created_once writes first
            raise CannotMake(f"cannot write the cookie key {key_file}: {exc.strerror or exc} (make the state "
                             "directory writable, or set CLAUDEOPS_SECRET_KEY)") from None
        if "claudeops.redactor" in app.extensions:   # built without the key, which it must redact too
            redaction.init_app(app)
    app.extensions[MADE] = True


def may_create_database(app: Flask) -> None:
    """For an app made to fill a new database outside the state directory
    (``claudeops copy-to``'s target): its SQLite file may be created, and
    nothing of the state directory is."""
    app.extensions[MADE] = True


def _make_dir(label: str, key: str, path: Path) -> None:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except FileExistsError:   # mkdir's word for a file where the directory should be
        raise CannotMake(f"the {label} {path} is not a directory (set {key})") from None
    except NotADirectoryError:   # a file where one of its parents should be
        in_the_way = next((parent for parent in path.parents if parent.is_file()), path.parent)
        raise CannotMake(f"cannot make the {label} {path}: {in_the_way} is a file, not a directory "
                         f"(set {key} to a path under a directory)") from None
    except OSError as exc:
        raise CannotMake(f"cannot make the {label} {path}: {exc.strerror or exc} (make its parent writable, "
                         f"or set {key})") from None


def kept_secret_key(config: dict) -> Optional[str]:
    """The cookie key the state directory holds, if it holds one; none is made."""
    path = _secret_key_file(config)
    if not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:   # said as a file that cannot be read is (app/cli.py)
        raise OSError(errno.EINVAL, "it is not UTF-8 text (remove it to have a new key made)", str(path)) from None


def _secret_key_file(config: dict) -> Path:
    # One key for every worker: generated once, kept in the state directory.
    return Path(config["CLAUDEOPS_STATE_DIR"]) / "secret_key"


def guard_database(app: Flask, engine: Engine) -> None:
    """Until the state directory is made, refuse to open a SQLite database
    whose file is not there: SQLite would create an empty one."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return

    # Weakly: Flask-SQLAlchemy keeps the engine for as long as the app lives,
    # and a listener holding the app would keep both for ever.
    app_ref = weakref.ref(app)

    @event.listens_for(engine, "do_connect")
    def _only_an_existing_file(*_args) -> None:
        app = app_ref()
        if app is None or not _absent(Path(database)):
            return
        if not app.extensions.get(MADE):
            raise NoDatabase(shown_url(make_url(app.config["SQLALCHEMY_DATABASE_URI"])), _missing(app, Path(database)))
        _create_owners_only(Path(database))


def _create_owners_only(path: Path) -> None:
    """An empty file, which SQLite takes for an empty database, readable by
    its owner only: SQLite itself would create one as the umask allows
    (022: readable by everyone), and gives its -wal and -shm files the
    database's mode. It holds what the agent learned and saw."""
    # Made meanwhile by another process of the service, or not to be made
    # at all: then SQLite, which cannot create it either, says why.
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def _absent(path: Path) -> bool:
    """Whether there is surely no file at ``path``. One that cannot be looked
    at (in another user's state directory: a command run without
    ``sudo -u``) may be there, and SQLite, which could not create it
    either, says why it cannot open it."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False


def _missing(app: Flask, database: Path) -> str:
    state_dir = Path(app.config["CLAUDEOPS_STATE_DIR"])
    if database.parent.resolve() == state_dir.resolve() and not state_dir.is_dir():
        return f"the state directory {state_dir} {'is not a directory' if state_dir.exists() else 'does not exist'}"
    if not database.parent.exists():
        return f"its directory {database.parent} does not exist"
    return "there is no such file"
