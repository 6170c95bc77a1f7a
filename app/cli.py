"""The ``claudeops`` command."""
from __future__ import annotations

import contextlib
import copy
import functools
import logging
import os
import signal
import sys
import threading
from pathlib import Path

import click
from flask import current_app
from flask.cli import FlaskGroup, NoAppException, ScriptInfo, with_appcontext
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from app import create_app, dbfaults, runtime, standard_output, state_dir
from app.backup_cli import backup_command, restore_command
from app.config import TIERS, ConfigError
from app.copy_cli import copy_to_command
from app.database_url import shown_url
from app.extensions import db
from app.plugins import PluginError, how_to_start_without
from app.portable_text import is_unicode
from app.revisions import (disabled_installed, heads_of_database, newer_schema, refused_revisions,
                           schema_no_revision_creates, set_aside, unknown_revisions)


# sysexits.h's EX_CONFIG: the status of a start refused for its settings
# (one invalid, a credential missing), which no restart mends. An init
# system can tell it from a failure a restart may (examples/systemd,
# RestartPreventExitStatus), instead of starting the service again and again.
EX_CONFIG = 78


class ConfigurationRefused(click.ClickException):
    """A command refused for the settings it was given."""

    exit_code = EX_CONFIG


class StartupError(NoAppException):
    """The application cannot be made (a bad setting, a broken plugin).

    A ``NoAppException`` because that is the one error Flask's command group
    reports in a line while it lists the commands (``claudeops --help``);
    any other comes out as a traceback. Shown as a plain ``ClickException``
    (``Error: ...``, status EX_CONFIG), not as the usage error Flask's is."""

    exit_code = EX_CONFIG

    def show(self, file=None) -> None:
        click.ClickException.show(self, file)


def _create_app():
    try:
        # Made by the commands that start the service or its database (app/state_dir.py).
        return create_app(make_state=False)
    except ConfigError as exc:
        raise StartupError(f"invalid configuration: {exc}") from None
    except PluginError as exc:
        raise StartupError(how_to_start_without(str(exc))) from None
    except OSError as exc:   # the state directory's secret key cannot be read
        raise StartupError(f"cannot read {exc.filename}: {exc.strerror or exc}") from None


def makes_state(callback):
    """For a command that starts the service or creates its database: the
    state directory (and its results directory and cookie key) made first,
    as every other command leaves it to be (app/state_dir.py)."""
    @functools.wraps(callback)
    def with_the_state_made(*args, **kwargs):
        app = click.get_current_context().ensure_object(ScriptInfo).load_app()
        try:
            state_dir.make(app)
        except state_dir.CannotMake as exc:   # a parent not writable, a file in the way
            raise click.ClickException(str(exc)) from None
        return callback(*args, **kwargs)
    return with_the_state_made


def _making_the_state(command: click.Command) -> click.Command:
    made = copy.copy(command)
    made.callback = makes_state(command.callback)
    return made


def _knowing_its_revisions(command: click.Command, name: str) -> click.Command:
    """For a db command that reads the database's revision: a database at
    one this installation lacks (a newer version's, a plugin's uninstalled
    or left out by CLAUDEOPS_DISABLE_PLUGINS) is explained, not answered
    with Alembic's bare "Can't locate revision". A disabled plugin's, with
    the rest at this version's heads, is no newer schema: ``current`` names
    each revision, ``upgrade`` has nothing to run (as at a start), and
    ``check`` and ``downgrade``, which Alembic cannot run without the
    plugin's revisions, say so."""
    callback = command.callback

    @functools.wraps(callback)
    def knowing(*args, **kwargs):
        app = click.get_current_context().ensure_object(ScriptInfo).load_app()
        with app.app_context():
            try:
                unknown = unknown_revisions(app)
            except OperationalError:   # unreachable: the command says so itself
                unknown = []
            if unknown and refused_revisions(app, unknown):
                raise click.ClickException(newer_schema(shown_url(db.engine.url), unknown,
                                                        disabled_installed(app)))
            if unknown:
                if name == "current":
                    for revision in sorted(heads_of_database(app)):
                        click.echo(f"{revision} (head)" if revision not in unknown else
                                   f"{revision} (of a plugin CLAUDEOPS_DISABLE_PLUGINS leaves out)")
                    return None
                if name == "upgrade":
                    click.echo(f"Nothing to upgrade: {set_aside(app, unknown)}.")
                    return None
                raise click.ClickException(f"{set_aside(app, unknown)}; `claudeops db {name}` needs their "
                                           "revisions: take them out of CLAUDEOPS_DISABLE_PLUGINS for it")
        return callback(*args, **kwargs)
    checked = copy.copy(command)
    checked.callback = knowing
    return checked


OFFLINE_SQL_REFUSED = (
    "--sql cannot write this out: the service's revisions read the database they change (to fill "
    "a new column from the rows there, to choose SQLite's statements or PostgreSQL's), which a "
    "script written beforehand cannot do. Back the database up (`claudeops backup`) and run the "
    "command without --sql.")


def _refusing_offline_sql(command: click.Command) -> click.Command:
    """For upgrade and downgrade: --sql refused before anything is done,
    rather than a part of a script written out and then Alembic's error (or
    a traceback) at the first revision that reads rows."""
    callback = command.callback

    @functools.wraps(callback)
    def refusing(*args, **kwargs):
        if kwargs.get("sql"):
            raise click.UsageError(OFFLINE_SQL_REFUSED)
        return callback(*args, **kwargs)
    refused = copy.copy(command)
    refused.callback = refusing
    refused.params = [copy.copy(param) for param in command.params]
    for param in refused.params:
        if param.name == "sql":
            param.help = "Not offered: the revisions read the database they change"
    return refused


def _beside_no_scheduler(command: click.Command, makes_database: bool = False) -> click.Command:
    """For a command that changes the schema: refused while the service's
    scheduler runs on the database (its version would go on working on a
    schema it was not written for, its dashboard failing), which it holds
    off meanwhile, as restore does. ``makes_database``: the command makes
    a SQLite file that is not there yet (upgrade), under the state
    directory's lock; another (downgrade, stamp) says it is missing, and
    leaves no lock file behind."""
    callback = command.callback

    @functools.wraps(callback)
    def holding_off_the_scheduler(*args, **kwargs):
        from app.backup_cli import hold_off_the_scheduler, leave_to_the_owner_of_their_directory
        if kwargs.get("sql"):   # --sql writes the statements out and touches no database
            return callback(*args, **kwargs)
        app = click.get_current_context().ensure_object(ScriptInfo).load_app()
        lock = _lock_a_scheduler_could_hold(app, makes_database)
        hold_off_the_scheduler(lock, "then run this command")
        try:
            return callback(*args, **kwargs)
        finally:
            lock.release()
            leave_to_the_owner_of_their_directory(list(lock.files))
    held = copy.copy(command)
    held.callback = holding_off_the_scheduler
    return held


class ClaudeOpsGroup(FlaskGroup):
    """Flask's command group, without its options for choosing an app: this
    command only ever serves Claude Ops, configured from the environment."""

    def __init__(self, **kwargs):
        super().__init__(create_app=_create_app, add_default_commands=False,
                         add_version_option=False, load_dotenv=False, set_debug_flag=False, **kwargs)
        self.params = [p for p in self.params if p.name not in {"env_file", "app", "debug"}]

    def main(self, *args, **kwargs):
        standard_output.install()   # `> /dev/full`: a line, not a traceback; no escape sequence to a terminal
        return super().main(*args, **kwargs)

    def invoke(self, ctx):
        """A command's failure that the operator can act on, in a line:
        a database not migrated to this version, or that no command can use
        (not a database, read-only, its disk full, its server down), a value
        on the command line that is not UTF-8 text (Python carries its bytes
        as lone surrogates, which no database or file takes). Any other error
        keeps its traceback."""
        try:
            return super().invoke(ctx)
        except state_dir.NoDatabase as exc:
            raise click.ClickException(f"{exc}. {_SERVICE_SETTINGS_FIRST}") from None
        except SQLAlchemyError as exc:
            advice = (_no_database(ctx, exc) or _no_revision_creates(ctx, exc) or dbfaults.schema_behind(exc)
                      or _unusable_database(ctx, exc) or _not_permitted(ctx, exc))
            if advice is None:
                raise
            raise click.ClickException(advice) from None
        except UnicodeEncodeError as exc:
            if exc.reason != "surrogates not allowed" or all(is_unicode(arg) for arg in sys.argv):
                raise
            raise click.ClickException("a value given on the command line is not UTF-8 text; "
                                       "check the encoding of the terminal or script that wrote it") from None

    def get_command(self, ctx, name):
        """A command of its own, or one a plugin adds, which needs the
        application: when it cannot be made, why, once, with status 78
        (EX_CONFIG).
        (Flask would print the reason, then "No such command" with the
        usage, and end with status 2.)"""
        self._load_plugin_commands()
        command = click.Group.get_command(self, ctx, name)
        if command is None and not ctx.resilient_parsing:   # completion: no app, no error
            ctx.ensure_object(ScriptInfo).load_app()   # StartupError: said in a line by click
        if command is None:
            command = super().get_command(ctx, name)
        return command and _schema_checked(command, name)

    def _load_plugin_commands(self):
        # Flask would add every installed package's "flask.commands" entry
        # point; of those, only Flask-Migrate's `db` belongs here. Plugins
        # add theirs through the claudeops_cli_commands hook.
        if not self._loaded_plugin_commands:
            from flask_migrate.cli import db
            # Of its commands, only upgrade may start a new database (and so its
            # state directory); it, downgrade and stamp change the schema.
            group = copy.copy(_own_directory_told(db))   # its -d too, which every command reads
            # \b: kept as written (click would break "list-templates" at its hyphen).
            group.help = ("The database's schema (Alembic).\n\n\b\n"
                          "An operator's: upgrade heads (serve runs it), current, check,\n"
                          "history, downgrade.\n"
                          "For plugin authors (docs/example-plugin.md): revision, migrate,\n"
                          "merge and edit write revision files; init and list-templates\n"
                          "set up a directory for them.")
            # stamp is left to meet any revision: `stamp --purge` is the way out of one that is lost.
            commands = {name: _own_directory_told(command) for name, command in db.commands.items()}
            group.commands = {**commands,
                              "current": _knowing_its_revisions(commands["current"], "current"),
                              "check": _knowing_its_revisions(commands["check"], "check"),
                              "upgrade": _refusing_offline_sql(_making_the_state(_beside_no_scheduler(
                                  _knowing_its_revisions(commands["upgrade"], "upgrade"), makes_database=True))),
                              "downgrade": _refusing_offline_sql(_beside_no_scheduler(
                                  _knowing_its_revisions(commands["downgrade"], "downgrade"))),
                              "stamp": _beside_no_scheduler(commands["stamp"])}
            self.add_command(group, "db")
            self._loaded_plugin_commands = True


def _own_directory_told(command: click.Command) -> click.Command:
    """A ``db`` command whose ``--directory`` help gives its real default:
    not Flask-Migrate's "migrations" of the working directory, but the
    service's own revisions, wherever the command is run, and its plugins'."""
    if not any(param.name == "directory" for param in command.params):
        return command
    told = copy.copy(command)
    told.params = [copy.copy(param) for param in command.params]
    for param in told.params:
        if param.name == "directory":
            param.help = "Migration script directory (default: the service's own, with its plugins' revisions)"
    return told


# The commands that may meet a database a newer version migrated: those that
# migrate it or say they cannot (db, serve, scheduler, run), copy or restore
# it whole (backup, restore, copy-to) or read only its settings (config), and
# those the CLI runs within a session (the cooldowns hook, which fails closed
# on its own, and the MCP server), which the service started after it checked
# the schema. Every other command, a plugin's too, reads or writes rows whose
# meaning a newer version may have changed, and refuses it.
SCHEMA_OF_ANY_VERSION = frozenset({"db", "serve", "scheduler", "run", "backup", "restore", "copy-to", "config",
                                   "mcp", "cooldowns check-tool"})


def _lock_a_scheduler_could_hold(app, makes_database: bool = False):
    """The runner lock where a scheduler could hold it: in a state directory
    and beside a SQLite file that are there (where they are not, none runs,
    and the command says what is missing itself), and PostgreSQL's own,
    which needs no state directory on a host that only migrates. With no
    SQLite file, and none to make, no scheduler can run on it: no lock."""
    from app.sessions.runner_lock import RunnerLock
    state = app.config["CLAUDEOPS_STATE_DIR"]
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    if url.get_backend_name() == "sqlite" and not (url.database and Path(url.database).exists()):
        url = None
        if not makes_database:
            state = None
    return RunnerLock(state if state is not None and Path(state).is_dir() else None, url)


def _schema_checked(command: click.Command, path: str) -> click.Command:
    """``command`` (at ``path``: its name, after its groups'), or each
    command of a group, refusing to run on a database at a schema revision
    this installation lacks. Checked when it runs, after its options are
    read: its ``--help`` needs no database."""
    if path in SCHEMA_OF_ANY_VERSION:
        return command
    checked = copy.copy(command)
    if isinstance(command, click.Group):
        # As the group finds each command, a lazy group's too.
        def get_command(ctx: click.Context, name: str):
            sub = command.get_command(ctx, name)
            return sub and _schema_checked(sub, f"{path} {name}")
        checked.get_command = get_command
        return checked

    def invoke(ctx: click.Context):
        app = ctx.ensure_object(ScriptInfo).load_app()
        with app.app_context():
            unknown = unknown_revisions(app)
            if refused_revisions(app, unknown):
                raise click.ClickException(newer_schema(shown_url(db.engine.url), unknown,
                                                        disabled_installed(app)))
        return command.invoke(ctx)
    checked.invoke = invoke
    return checked


def _no_revision_creates(ctx: click.Context, exc: SQLAlchemyError) -> str | None:
    """A table or column missing from a database at every revision this
    installation has: a plugin's model that no revision of its creates,
    which migrating again, as the usual advice goes, would not mend."""
    if dbfaults.schema_behind(exc) is None:
        return None
    app = ctx.ensure_object(ScriptInfo).load_app()
    with app.app_context():
        try:
            return schema_no_revision_creates(app)
        except SQLAlchemyError:
            return None


def _no_database(ctx: click.Context, exc: SQLAlchemyError) -> str | None:
    """A table missing from a database that holds none: most often not the
    service's database at all (a command run without its
    CLAUDEOPS_STATE_DIR), where migrating would only make a second, empty
    one. Say which database was looked at before how to migrate it."""
    if dbfaults.schema_behind(exc) is None:
        return None
    app = ctx.ensure_object(ScriptInfo).load_app()
    if not _holds_no_tables(app):
        return None
    return f"there is no Claude Ops database at {_shown_database(app)}: it holds no tables. {_SERVICE_SETTINGS_FIRST}"


def _holds_no_tables(app) -> bool:
    """Whether the database holds no table at all: never migrated, or not
    the service's; False when that cannot be told."""
    try:
        with app.app_context():
            return not inspect(db.engine).get_table_names()
    except SQLAlchemyError:
        return False


def _shown_database(app) -> str:
    return shown_url(make_url(app.config["SQLALCHEMY_DATABASE_URI"]))


# What to do about a database that is not there, or holds nothing.
_SERVICE_SETTINGS_FIRST = (
    "Run the command with the service's settings (CLAUDEOPS_STATE_DIR, or CLAUDEOPS_DATABASE_URL); to start a new "
    "database there, run `claudeops db upgrade heads` (`claudeops serve`, `scheduler` and `run` do it when they "
    "start)")


def _unusable_database(ctx: click.Context, exc: SQLAlchemyError) -> str | None:
    fault = dbfaults.unusable(exc)
    if fault is None:
        return None
    # The command's app context is gone by now; the app it ran in is kept.
    app = ctx.ensure_object(ScriptInfo).load_app()
    return f"cannot use the database {shown_url(make_url(app.config['SQLALCHEMY_DATABASE_URI']))}: {fault}"


def _not_permitted(ctx: click.Context, exc: SQLAlchemyError) -> str | None:
    """``claudeops db upgrade`` by a role that may not create the tables."""
    if getattr(getattr(exc, "orig", None), "sqlstate", None) is None:
        return None
    url = make_url(ctx.ensure_object(ScriptInfo).load_app().config["SQLALCHEMY_DATABASE_URI"])
    advice = dbfaults.not_permitted(exc, url.username)
    return f"cannot use the database {shown_url(url)}: {advice}" if advice else None


@click.group(cls=ClaudeOpsGroup)
def main():
    """Claude Ops: run the Claude Code CLI on a schedule against your
    infrastructure; record what the agent reports through plugins, and review
    it in a dashboard and a JSON API.

    Settings come from CLAUDEOPS_* environment variables (see `claudeops config`).
    `claudeops db upgrade heads`, `claudeops db check` and `claudeops db history`
    manage the database schema.
    """


def _guarded(callback):
    """``serve`` refuses to be reached unguarded, before the state directory
    is made: a refused start leaves nothing behind."""
    @functools.wraps(callback)
    def refusing_an_open_door(*args, host: str, **kwargs):
        from app.auth import credentials_configured, is_loopback
        config = click.get_current_context().ensure_object(ScriptInfo).load_app().config
        if not is_loopback(host) and not credentials_configured(config):
            raise ConfigurationRefused(
                f"refusing to listen on {host}: anyone who reaches it could run the agent. Set CLAUDEOPS_PASSWORD "
                "(dashboard) or CLAUDEOPS_API_TOKEN (API) first, or listen on 127.0.0.1")
        proxies = config["CLAUDEOPS_TRUSTED_PROXIES"]
        if proxies and not credentials_configured(config):
            # A proxy's requests come from loopback, whoever sent them to it.
            raise ConfigurationRefused(
                f"refusing to serve behind a reverse proxy (CLAUDEOPS_TRUSTED_PROXIES={proxies}) with no "
                "credential: anyone who reaches the proxy could run the agent. Set CLAUDEOPS_PASSWORD "
                "(dashboard) or CLAUDEOPS_API_TOKEN (API) first")
        if proxies and not is_loopback(host):
            # Whoever reaches it around the proxy names any address in X-Forwarded-For: the login limit's too.
            logging.getLogger("app.serve").warning(
                "listening on %s behind a reverse proxy (CLAUDEOPS_TRUSTED_PROXIES=%s): a client that reaches "
                "it directly, not through the proxy, is believed whatever address and scheme it claims, and "
                "escapes the login limit; listen on 127.0.0.1 with the proxy on this machine", host, proxies)
        return callback(*args, host=host, **kwargs)
    return refusing_an_open_door


def _listen_host(ctx, param, value: str) -> str:
    from app.serve import listen_host
    try:
        return listen_host(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, callback=_listen_host,
              help="Address the dashboard and API listen on (an IP address or a host name, without a port); "
                   "any but loopback needs CLAUDEOPS_PASSWORD or CLAUDEOPS_API_TOKEN set.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535), help="Port to listen on.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1, 64),
              help="gunicorn worker processes (the scheduler is always exactly one, beside them).")
@_guarded
@makes_state
@with_appcontext
def serve(host: str, port: int, workers: int):
    """Apply migrations, then serve the dashboard and API with gunicorn and run
    the scheduler. Stops cleanly on SIGTERM, Ctrl-C or a closed terminal (SIGHUP)."""
    from app.serve import MigrationError, StateDirError, serve as run_service
    from app.sessions.runner_lock import RunnerLockError
    try:
        sys.exit(run_service(current_app._get_current_object(), host, port, workers))
    except (RunnerLockError, MigrationError, StateDirError) as exc:
        raise click.ClickException(str(exc)) from None


@main.command()
@makes_state
@with_appcontext
def scheduler():
    """Run only the scheduler (apply migrations first); no web server."""
    from app.serve import MigrationError, StateDirError, run_scheduler
    from app.sessions.runner_lock import RunnerLockError
    try:
        sys.exit(run_scheduler(current_app._get_current_object()))
    except (RunnerLockError, MigrationError, StateDirError) as exc:
        raise click.ClickException(str(exc)) from None


def _checked_prompt(prompt: str | None) -> str | None:
    """The request as it is queued; one that cannot be is refused as the
    options are read, before the state directory is made or anything started."""
    from app.sessions.control import ControlError, checked_prompt
    try:
        return checked_prompt(prompt)
    except ControlError as exc:
        raise click.ClickException(str(exc)) from None


# What `claudeops run` says stopped its session.
STOP_SIGNAL_WORDS = {signal.SIGINT: "SIGINT: Ctrl-C", signal.SIGTERM: "SIGTERM",
                     signal.SIGHUP: "SIGHUP: its terminal closed"}
LOST_LOCK_REASON = ("`claudeops run` lost the database's runner lock (another process took it, or the database "
                    "could not be reached again within 60 s)")


@main.command("run")
@click.option("--tier", default=1, show_default=True, type=click.IntRange(1, 3),
              help=f"Tier to run: {', '.join(f'{n} {name}' for n, name in TIERS.items())}.")
@click.option("--prompt", default=None, callback=lambda ctx, param, value: _checked_prompt(value),
              help="An ad-hoc request, added to the tier's instructions.")
@makes_state
@with_appcontext
def run_once(tier: int, prompt: str | None):
    """Run a session now, in the foreground, then one after another the
    escalations its chain asks for (the next tier, up to CLAUDEOPS_MAX_TIER),
    printing how each ended.

    Exits 0 if the last session of the chain completed, 1 otherwise. Meant
    for trying a setup out; it refuses while another process runs sessions
    on the same state directory or database (`claudeops serve`, `claudeops
    scheduler`, another `claudeops run`; use Run now there instead), so two
    sessions never run at once. Killed outright between two sessions of its chain, the
    escalation it had queued is not run later: the next `claudeops run` or
    scheduler start ends it as interrupted."""
    from app.serve import MigrationError, StateDirError, apply_migrations, check_writable_dirs
    from app.sessions import control, recovery
    from app.sessions.runner_lock import RunnerLock, RunnerLockError, SchedulerAlreadyRunning
    app = current_app._get_current_object()
    lock = RunnerLock(app.config["CLAUDEOPS_STATE_DIR"], app.config["SQLALCHEMY_DATABASE_URI"])
    try:
        check_writable_dirs(app)
    except StateDirError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        lock.acquire()
    except SchedulerAlreadyRunning as exc:
        raise click.ClickException(f"{exc}, or use Run now in its dashboard") from None
    except RunnerLockError as exc:   # the database's lock, when the database cannot be reached
        raise click.ClickException(str(exc)) from None
    # Ctrl-C, SIGTERM or a closed terminal ends the session as stopped, with
    # its group, instead of leaving it running.
    from app.serve import STOP_SIGNALS
    shutdown = threading.Event()

    def stop(signum, _frame) -> None:
        said = STOP_SIGNAL_WORDS.get(signum, signal.Signals(signum).name)
        shutdown.claudeops_reason = f"`claudeops run` was stopped ({said})"
        shutdown.set()
    for sig in STOP_SIGNALS:
        signal.signal(sig, stop)
    finished = threading.Event()   # set as the run ends: the lock is given back then, not lost
    threading.Thread(target=_keep_the_lock, args=(lock, shutdown, finished), name="runner-lock", daemon=True).start()
    try:
        try:
            apply_migrations(app)
        except MigrationError as exc:
            raise click.ClickException(str(exc)) from None
        try:
            recovery.recover()   # what an earlier `claudeops run` or scheduler, killed, left behind
            session = _run_chain(tier, prompt, shutdown)
        except SQLAlchemyError as exc:
            if (undecided := getattr(exc, "claudeops_undecided", None)) is not None:   # its end is recorded
                raise click.ClickException(
                    f"session #{undecided.session_id} ended {undecided.result.status}, but the escalation it asked "
                    f"for ({undecided.reason}) could not be queued: {dbfaults.describe(exc)}; run tier "
                    f"{undecided.run.tier + 1} by hand if it is still wanted") from None
            raise click.ClickException(
                f"the session could not be recorded: {dbfaults.describe(exc)}; if it shows as running, the "
                "next `claudeops run` or scheduler start marks it interrupted") from None
    finally:
        finished.set()
        lock.release()
    sys.exit(0 if session.status == "completed" else 1)


def _keep_the_lock(lock, shutdown: threading.Event, finished: threading.Event) -> None:
    """Hold the runner lock for as long as the run goes on, as the scheduler
    does: a database lock lost with its connection (a server restart) is
    taken again; if it cannot be (another process has it, or the database
    stays unreachable), the running session is stopped, saying why, and
    nothing more is run."""
    from app.sessions.runner_lock import CHECK_SECONDS
    while not finished.wait(CHECK_SECONDS):
        try:
            if lock.verify() or finished.is_set():
                continue
        except Exception:   # the thread must outlive a failure, or the lock is never checked again
            logging.getLogger(__name__).exception(
                "checking the database's runner lock failed; it is checked again in a second")
            continue
        logging.getLogger(__name__).error("%s; the running session is stopped", LOST_LOCK_REASON)
        shutdown.claudeops_reason = LOST_LOCK_REASON
        shutdown.set()
        return


def _run_chain(tier: int, prompt: str | None, shutdown: threading.Event):
    """Run a session, then its escalations one after another, here rather
    than leaving them queued for a scheduler that may start much later (and
    then run a stale tier 2 or 3 first); the last session of the chain."""
    from app.models import CLI_TRIGGER
    from app.sessions import control, escalation
    from app.sessions.manager import run_session
    session = control.claim(control.enqueue(tier=tier, prompt=prompt, trigger=CLI_TRIGGER).id)
    while True:
        session = run_session(session, shutdown)
        _echo_outcome(session)
        child = escalation.queued_child(session)
        if child is None:
            return session
        standard_output.echo(f"session #{session.id} escalated to tier {child.tier} ({TIERS[child.tier]}) as "
                             f"session #{child.id}: {child.escalation_reason}")
        if shutdown.is_set():   # asked to stop as the session ended: the child must not stay queued
            with contextlib.suppress(control.ControlError):   # stopped on the dashboard already
                control.request_stop(child.id)
        session = control.claim(child.id)
        if session is None:   # stopped before it started
            db.session.refresh(child)
            _echo_outcome(child)
            return child


def _echo_outcome(session) -> None:
    reason = f" ({session.status_reason})" if session.status_reason else ""
    standard_output.echo(f"session #{session.id}: {session.status}{reason}")
    if session.response:
        standard_output.echo(session.response)


@main.command("prune")
@click.option("--dry-run", is_flag=True, help="Count what would be removed; remove nothing.")
@with_appcontext
def prune(dry_run: bool):
    """Remove what is past its retention now, and print what was removed: the
    activity logs, run log files, system prompts and records of the memories
    given to sessions that ended more than CLAUDEOPS_LOG_RETENTION_DAYS ago
    (the sessions themselves are kept), events
    older than CLAUDEOPS_EVENT_RETENTION_DAYS, cooldown records older than
    CLAUDEOPS_COOLDOWN_RETENTION_DAYS (never one a limit's window still
    counts), and what installed plugins prune. Memories are never removed.
    Then print every retention setting in force.

    The scheduler does the same at start and daily; this runs it by hand.
    Rows are deleted in batches, so it may run beside the service. A session
    whose run logs are in another host's results directory (the scheduler's,
    with a dashboard on this one) is left whole to that host's retention
    for a week past its own; after that, it is pruned here."""
    from app.retention import periods_in_force
    from app.retention import prune as prune_now
    report = prune_now(dry_run=dry_run)
    if report.anything:
        click.echo("Would remove (a dry run: nothing was removed):" if dry_run else "Removed:")
        for line in report.lines():
            click.echo(f"  {line}")
    elif not report.left_to_their_host:
        click.echo("Nothing is past its retention.")
    if report.left_to_their_host:
        click.echo(f"Left to the host that ran them: {report.left_to_their_host} sessions' logs (their run "
                   "logs are in its results directory, and its scheduler removes them)")
    click.echo("Retention in force:")
    for name, days in periods_in_force():
        kept = f"{days} day{'' if days == 1 else 's'}" if days else "kept forever"
        click.echo(f"  {name}={days} ({kept})")


@main.command("logout-all")
@with_appcontext
def logout_all():
    """End every dashboard login: each browser must log in again. For a
    device lost while logged in, or a PostgreSQL database restored with
    pg_restore, which brings back logins ended since its dump (`restore`
    ends them itself). The API token and the password are unchanged."""
    from app import logins
    ended = logins.end_all(current_app.permanent_session_lifetime)
    click.echo(f"Ended {ended} dashboard login{'' if ended == 1 else 's'}.")


@main.command("mcp")
@click.option("--list", "list_tools", is_flag=True, help="Print the tools as JSON and exit.")
@with_appcontext
def mcp_server(list_tools: bool):
    """Serve the plugins' read-only tools (memory search, …) over MCP on
    stdin/stdout. Every session's CLI starts this itself (--mcp-config); run
    it by hand to use the tools from another MCP client."""
    from app.mcp import build_server, describe, serve_stdio
    app = current_app._get_current_object()
    if list_tools:
        click.echo(describe(app))
        return
    serve_stdio(build_server(app))


@main.command("config")
@with_appcontext
def show_config():
    """Print every setting with its effective value: for a runtime setting,
    the change made on /config or through the API, if any. With no database
    to read those from (none yet, before the service first starts), the
    environment's values and the defaults, saying why on standard error."""
    try:
        changed = runtime.overrides()
    except (state_dir.NoDatabase, SQLAlchemyError) as exc:   # never served, or not reachable
        # Said, on standard error, as a comment: the settings are still worth showing.
        click.echo(f"# runtime settings unavailable: {_why_no_runtime_settings(exc)}", err=True)
        click.echo("# the values below are the environment's and the defaults", err=True)
        changed = {}
    from app.serve import unknown_settings
    from app.web.config_page import shown   # as the Config page shows them: secrets masked, true/false
    for message in unknown_settings(current_app):
        click.echo(f"# {message}", err=True)
    for setting in current_app.extensions["claudeops.settings"]:
        value = current_app.config[setting.name]
        note = ""
        why = runtime.refused(setting, changed.get(setting.name)) if setting.runtime else None
        if why:   # stored when an earlier version took it
            note = f"  # the change stored on /config ({shown(setting, changed[setting.name])}) is ignored: {why}"
        elif setting.runtime and setting.name in changed:
            configured = value
            value = runtime.in_force(setting, changed[setting.name])
            if value != configured and not setting.secret:
                source = "the environment says" if setting.name in os.environ else "the default is"
                note = f"  # changed on /config; {source} {shown(setting, configured)}"
        click.echo(f"{setting.name}={shown(setting, value)}{note}")


def _why_no_runtime_settings(exc: Exception) -> str:
    """Why the database gave no runtime change: most often, because there is
    none yet (the state directory of a service never started), which is no
    fault to report as one."""
    made_by = "starting the service, or `claudeops db upgrade heads`,"
    if isinstance(exc, state_dir.NoDatabase):
        return f"there is no database yet at {exc.url} ({exc.why}); {made_by} makes it"
    app = current_app._get_current_object()
    if dbfaults.schema_behind(exc) is None:   # not reachable, not a database
        fault = dbfaults.unusable(exc) or dbfaults.describe(exc)
        return f"cannot use the database {_shown_database(app)}: {fault}"
    if _holds_no_tables(app):
        return f"the database {_shown_database(app)} holds no tables yet; {made_by} makes them"
    return f"the database {_shown_database(app)} is not migrated to this version yet; {made_by} migrates it"


main.add_command(backup_command)
main.add_command(restore_command)
main.add_command(copy_to_command)

if __name__ == "__main__":   # python -m app.cli: the command, not a silent import
    main(prog_name="claudeops")
