"""``claudeops serve``: migrations, then gunicorn for the dashboard and API,
and the one scheduler in this process.

gunicorn runs as a child process with as many workers as asked; the
scheduler lives here, outside the workers, so there is exactly one however
many workers serve the dashboard. SIGTERM, SIGINT or SIGHUP stops the
scheduler first (a running session is ended and recorded as stopped), then
gunicorn.
"""
from __future__ import annotations

import difflib
import errno
import ipaddress
import logging
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import flask_migrate
from flask import Flask
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError, ProgrammingError, SQLAlchemyError

from app import dbfaults, runtime
from app.config import PROJECT_ROOT
from app.database_url import absolute_sqlite_url, shown_url
from app.extensions import db
from app.revisions import (disabled_installed, newer_schema, refused_revisions, schema_no_revision_creates,
                           unknown_revisions)
from app.sessions.prompts import TIER_PROMPT_FILES
from app.sessions.scheduler import SessionScheduler

log = logging.getLogger(__name__)
# What ends the service cleanly: systemd's stop, Ctrl-C, and the terminal or
# SSH connection it was started from closing, which would otherwise kill it
# outright and leave a running session to be marked interrupted.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

GUNICORN_STOP_SECONDS = 30
# Ends gunicorn if this process is killed outright (see the file).
GUNICORN_CONF = Path(__file__).with_name("gunicorn_conf.py")


class MigrationError(RuntimeError):
    """The database schema cannot be brought up to date; the message says why."""


class StateDirError(RuntimeError):
    """A directory the service must write to cannot be written."""


def check_writable_dirs(app: Flask) -> None:
    """Refuse to start, naming the directory, rather than fail at the first
    write (a read-only volume, a wrong owner) or the first session (a
    working directory that is a file)."""
    on_sqlite = make_url(app.config["SQLALCHEMY_DATABASE_URI"]).get_backend_name() == "sqlite"
    state_holds = "the database and the cookie key" if on_sqlite else "the cookie key"
    for label, key, holds in (("state directory", "CLAUDEOPS_STATE_DIR", state_holds),
                              ("results directory", "CLAUDEOPS_RESULTS_DIR", "the run logs"),
                              ("working directory", "CLAUDEOPS_WORKDIR", None)):
        path = app.config[key]
        try:
            if key == "CLAUDEOPS_WORKDIR":
                Path(path).mkdir(parents=True, exist_ok=True)   # as each session makes it
            with tempfile.TemporaryFile(dir=path):
                pass
        except OSError as exc:
            raise StateDirError(f"the {label} {path} cannot be written: {exc.strerror or exc} "
                                f"(make it writable or set {key})") from None
        mode = Path(path).stat().st_mode & 0o777
        if holds and mode & 0o077:
            log.warning("the %s %s can be read by other users (mode %o); it holds %s: chmod 700 it",
                        label, path, mode, holds)


def warn_of_what_sessions_lack(app: Flask) -> None:
    """A Claude CLI or tier prompt that is not there fails every session:
    said at start, where the operator looks, rather than only by each
    session's reason. A warning, not a refusal: the dashboard still serves,
    and either may be put in place while the service runs."""
    claude = app.config["CLAUDEOPS_CLAUDE_BIN"]
    if shutil.which(claude) is None:
        log.warning("the Claude CLI %r is not an executable file, nor found on PATH: every session fails until "
                    "it is installed (or CLAUDEOPS_CLAUDE_BIN names it)", claude)
    for tier, name in TIER_PROMPT_FILES.items():
        path = Path(app.config["CLAUDEOPS_PROMPTS_DIR"]) / name
        if not path.is_file():
            log.warning("the tier %d prompt %s is not there: tier %d sessions fail until it is "
                        "(CLAUDEOPS_PROMPTS_DIR)", tier, path, tier)


# Read by the service itself, not settings: what one process tells another
# (the session's CLI, gunicorn's workers), bin/'s virtual environment, the tests.
NOT_SETTINGS = ("CLAUDEOPS_READY_FD", "CLAUDEOPS_SERVE_PID", "CLAUDEOPS_SESSION_ID", "CLAUDEOPS_TIER",
                "CLAUDEOPS_WITHHELD_SECRETS", "CLAUDEOPS_VENV")
NOT_SETTINGS_PREFIX = "CLAUDEOPS_TEST_"


def unknown_settings(app: Flask) -> list[str]:
    """What to say of each CLAUDEOPS_* variable that is no setting of the
    service or of a plugin it loaded: most likely one misspelt
    (CLAUDEOPS_INTERVL=600), and the default would hold without a word.
    (PUT /api/v1/config refuses such a name; the environment can only be
    warned of.)"""
    known = {setting.name for setting in app.extensions["claudeops.settings"]}
    said = []
    for name in sorted(os.environ):
        if (not name.startswith("CLAUDEOPS_") or name in known or name in NOT_SETTINGS
                or name.startswith(NOT_SETTINGS_PREFIX)):
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        said.append(f"{name} is set, but it is no setting of Claude Ops or of a plugin it loaded"
                    f"{f' (did you mean {close[0]}?)' if close else ''}: it is ignored")
    return said


def warn_of_unknown_settings(app: Flask) -> None:
    for message in unknown_settings(app):
        log.warning("%s", message)


def say_what_the_config_page_holds_over(app: Flask) -> None:
    """A change made on the Config page (or PUT /api/v1/config) holds over the
    environment until it is reset: a variable set for this start and not in
    force would otherwise go unexplained (``claudeops config`` shows it too)."""
    with app.app_context():
        try:
            changed = runtime.overrides()
        except SQLAlchemyError:   # the scheduler meets it soon enough, and says so
            return
        finally:
            db.session.remove()
        for spec in runtime.runtime_settings():
            raw = changed.get(spec.name)
            if raw is None or spec.secret or spec.name not in os.environ or runtime.refused(spec, raw):
                continue
            if runtime.in_force(spec, raw) != app.config[spec.name]:
                log.warning("%s is %s, as changed on the Config page; the environment's %s holds once that "
                            "change is reset", spec.name, raw, os.environ[spec.name])


def apply_migrations(app: Flask) -> None:
    """Every head: the host's revisions and each plugin's own branch; then
    every model's table must be there. (Revisions that cannot be read
    together stopped the app's creation: app/revision_graph.py.)"""
    with app.app_context():
        _upgrade_to_every_head(app)
        _refuse_schema_not_created(app)


def _upgrade_to_every_head(app: Flask) -> None:
    try:
        unknown = unknown_revisions(app)
        if refused_revisions(app, unknown):
            raise MigrationError(newer_schema(shown_url(db.engine.url), unknown,
                                              disabled_installed(app)))
        if not unknown:   # else a disabled plugin's, with nothing else to run (refused_revisions)
            flask_migrate.upgrade(revision="heads")
    except OperationalError as exc:   # a database server that is down, or refuses us
        url = shown_url(db.engine.url)
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise MigrationError(f"cannot use the database {url}: {reason}") from None
    except ProgrammingError as exc:   # a role that may not create the tables
        advice = dbfaults.not_permitted(exc, db.engine.url.username)
        if advice is None:
            raise
        raise MigrationError(f"cannot migrate the database {shown_url(db.engine.url)}: {advice}") from None
    except SystemExit:   # Flask-Migrate logs Alembic's error and exits
        raise MigrationError(
            "the database could not be migrated (see the error above). If it names a revision it "
            "cannot locate, a plugin whose tables are in this database was uninstalled: reinstall it "
            "and run `claudeops db downgrade <branch>@base` before removing it") from None


def _refuse_schema_not_created(app: Flask) -> None:
    """A plugin whose tables or columns no revision created would fail at
    its first query, long after the start: stopped here, with the likely cause."""
    why = schema_no_revision_creates(app)
    if why is not None:
        raise MigrationError(why)


# A number as an address's part may be written: decimal, octal, hexadecimal.
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]*|[0-9]+")
# A host name as DNS has it: labels of letters, digits and hyphens, not
# beginning or ending with one, joined by dots (a closing dot allowed).
_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(?:\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")


# A port as people write it: ASCII digits (str.isdigit() also takes "²", which int() refuses).
_PORT = re.compile(r"[0-9]{1,5}")


def listen_host(given: str) -> str:
    """``given`` as an address to listen on: an IP address (an IPv6 one with
    or without brackets) or a host name. Anything else raises ``ValueError``
    saying why, so that ``serve`` stops at once: gunicorn would otherwise be
    handed ``127.0.0.1:9000:8080`` and fail with a message of its own, or a
    port given twice would leave the operator guessing which one is used."""
    host = given.strip()
    if _is_address_or_name(host):
        return host
    name, colon, port = host.rpartition(":")
    if colon and _PORT.fullmatch(port) and 1 <= int(port) <= 65535 and _is_address_or_name(name):
        raise ValueError(f"{given!r} has a port in it: give the port with --port "
                         f"(--host {name.strip('[]')} --port {port})")
    raise ValueError(f"{given!r} is neither an IP address nor a host name")


def _is_address_or_name(host: str) -> bool:
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(bare).version == 6 or bare == host
    except ValueError:
        pass
    # A name of numbers only is an address written short or in another base
    # (1.2.3, 127.1, 0x7f000001), which each resolver reads its own way.
    return (bare == host and len(host) <= 253 and _HOST_NAME.fullmatch(host) is not None
            and not all(_NUMBER.fullmatch(label) for label in host.rstrip(".").split(".")))


def address(host: str, port: int) -> str:
    """``host:port`` as gunicorn binds it and a browser opens it: an IPv6
    address in brackets (``[::1]:8080``), given with them or without."""
    host = host.strip().strip("[]")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gunicorn_command(host: str, port: int, workers: int, log_level: str = "INFO",
                     access_log: bool = True) -> list[str]:
    """gunicorn logging at the service's level; its access log (a line a
    request, at INFO: each open dashboard tab's polls write some 2,000 an
    hour) only where INFO lines are logged and ``access_log`` is on."""
    # No control socket: gunicorn would put one for every instance at the same
    # path in $HOME, and this process is what controls its gunicorn.
    logs_info = log_level in ("DEBUG", "INFO")
    return [sys.executable, "-m", "gunicorn", "--workers", str(workers), "--bind", address(host, port),
            "--chdir", str(PROJECT_ROOT), "--log-level", log_level.lower(),
            *(["--access-logfile", "-"] if access_log and logs_info else []), "--graceful-timeout", "20",
            "--no-control-socket", "--config", str(GUNICORN_CONF), "wsgi:app"]


def worker_environment(app: Flask) -> dict[str, str]:
    """Workers must use the same state directory and database as this process
    (they read the same generated secret key from the state directory). A
    path the operator set may be relative, and gunicorn works from the
    checkout: theirs are passed as this process resolved them. One left
    unset is left unset, so the Config page still says it is the default."""
    env = dict(os.environ)
    for name in ("CLAUDEOPS_STATE_DIR", "CLAUDEOPS_RESULTS_DIR"):
        if os.environ.get(name):
            env[name] = str(Path(app.config[name]).resolve())
    if os.environ.get("CLAUDEOPS_DATABASE_URL"):
        env["CLAUDEOPS_DATABASE_URL"] = absolute_sqlite_url(app.config["CLAUDEOPS_DATABASE_URL"])
    return env


def serve(app: Flask, host: str, port: int, workers: int) -> int:
    check_writable_dirs(app)
    scheduler = SessionScheduler(app)
    scheduler.hold_runner_lock()  # first: refuses to run beside another scheduler, or to migrate beside it
    apply_migrations(app)
    warn_of_what_sessions_lack(app)
    warn_of_unknown_settings(app)
    say_what_the_config_page_holds_over(app)
    env = worker_environment(app)
    stop = stop_on_signals()

    # The gunicorn master ends with this process (app/gunicorn_conf.py).
    command = gunicorn_command(host, port, workers, app.config["CLAUDEOPS_LOG_LEVEL"], app.config["CLAUDEOPS_ACCESS_LOG"])
    ready, tell_ready = os.pipe()
    web = subprocess.Popen(command, env={**env, "CLAUDEOPS_SERVE_PID": str(os.getpid()),
                                         "CLAUDEOPS_READY_FD": str(tell_ready)}, pass_fds=(tell_ready,))
    os.close(tell_ready)
    exit_code = 0
    # No session before the dashboard is up: a port already taken ends the
    # start before the agent is ever run.
    if _wait_until_bound(ready, stop):
        log.info("dashboard on http://%s with %d worker(s); one scheduler in pid %d",
                 address(host, port), workers, os.getpid())
        scheduler.start()
    elif not stop.is_set():
        taken = (": the address is in use (another Claude Ops, or another program, listens there): stop that, or "
                 "choose another --port" if address_in_use(host, port) else " (see above)")
        log.error("gunicorn exited with status %s before it served %s%s; no session was started",
                  web.wait(), address(host, port), taken)
        exit_code = 1
    while exit_code == 0 and not stop.wait(1.0):
        if web.poll() is not None:
            log.error("gunicorn exited with status %s; shutting down", web.returncode)
            exit_code = 1
            break
        if scheduler.shutdown_event.is_set():   # it lost its runner lock
            log.error("the scheduler stopped, having lost its runner lock; shutting down")
            exit_code = 1
            break
    log.info("shutting down%s", stopped_by(stop))
    scheduler.shutdown()
    if web.poll() is None:
        web.terminate()
        try:
            web.wait(GUNICORN_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            web.kill()
            web.wait()
    return exit_code


def stop_on_signals() -> threading.Event:
    """An event set by the first of STOP_SIGNALS, which it names."""
    stop = threading.Event()

    def received(signum, _frame) -> None:
        if not stop.is_set():
            stop.claudeops_signal = signal.Signals(signum).name
        stop.set()
    for sig in STOP_SIGNALS:
        signal.signal(sig, received)
    return stop


def stopped_by(stop: threading.Event) -> str:
    """`` on SIGHUP``, say: which signal stopped the service, for the log
    (a closed terminal is not an init system's stop)."""
    name = getattr(stop, "claudeops_signal", None)
    return f" on {name}" if name else ""


def address_in_use(host: str, port: int) -> bool:
    """Whether something listens at ``host:port`` already (a bind there
    fails with EADDRINUSE): why gunicorn, which says only that it retries,
    could not serve it."""
    try:
        found = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return False
    for family, kind, protocol, _, where in found:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as gunicorn binds
            try:
                probe.bind(where)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return True
    return False


def _wait_until_bound(ready: int, stop: threading.Event) -> bool:
    """Whether gunicorn said it bound its port (a byte on ``ready``), rather
    than exiting first (the pipe's end) or the service being stopped."""
    try:
        while not stop.is_set():
            readable, _, _ = select.select([ready], [], [], 1.0)
            if readable:
                return os.read(ready, 1) == b"1"
        return False
    finally:
        os.close(ready)


def run_scheduler(app: Flask) -> int:
    """The scheduler alone, for deployments that serve the dashboard elsewhere."""
    check_writable_dirs(app)
    scheduler = SessionScheduler(app)
    scheduler.hold_runner_lock()
    apply_migrations(app)
    warn_of_what_sessions_lack(app)
    warn_of_unknown_settings(app)
    say_what_the_config_page_holds_over(app)
    stop = stop_on_signals()
    scheduler.start()
    exit_code = 0
    while not stop.wait(1.0):
        if scheduler.shutdown_event.is_set():   # it lost its runner lock
            log.error("the scheduler stopped, having lost its runner lock")
            exit_code = 1
            break
    else:
        log.info("shutting down%s", stopped_by(stop))   # as serve says it: the journal shows a clean stop
    scheduler.shutdown()
    return exit_code
