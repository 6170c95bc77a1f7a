"""Claude Ops: the host application."""
from __future__ import annotations

import logging
import os
from datetime import timedelta
from typing import Any, Iterable, Optional

import click
from flask import Flask, current_app, request
from flask.sessions import SecureCookieSessionInterface
from werkzeug.middleware.proxy_fix import ProxyFix

from app import db_redaction, log_lines, migration_log, redaction, state_dir
from app.config import PROJECT_ROOT, SETTINGS, Setting, derive_paths, disabled_plugins, load_settings
from app.database_url import engine_options, left_in_the_instance_folder, service_url
from app.extensions import csrf, db, dispose_at_exit, limiter, migrate
from app.plugins import PluginError, call_at_startup, make_plugin_manager
from app.revision_graph import check_revision_graph

MIGRATIONS_DIR = PROJECT_ROOT / "migrations"


def create_app(test_config: Optional[dict[str, Any]] = None, plugins: Iterable[Any] = (),
               make_state: bool = True) -> Flask:
    """Build the application.

    ``test_config`` overrides settings (any ``CLAUDEOPS_*`` key or Flask key);
    ``plugins`` are registered in addition to the built-in and entry-point ones,
    which is how a test adds a plugin for one app only. Without
    ``make_state``, the state directory is used as it is found, and made only
    by ``state_dir.make`` (see app/state_dir.py): what the ``claudeops``
    command does, for its commands that start the service or its database.
    """
    app = Flask(__name__, template_folder=str(PROJECT_ROOT / "templates"))
    test_config = test_config or {}
    disabled = disabled_plugins(test_config)
    pm = make_plugin_manager(extra_plugins=plugins,
                             load_entry_points=test_config.get("CLAUDEOPS_LOAD_ENTRY_POINTS", True),
                             disabled=disabled)
    app.extensions["claudeops.plugins"] = pm
    settings = SETTINGS + _plugin_settings(pm)
    app.extensions["claudeops.settings"] = settings
    app.config.update(load_settings(settings=settings))
    if test_config:
        app.config.update(test_config)
    app.config["CLAUDEOPS_DISABLE_PLUGINS"] = disabled   # as read, whoever set it
    derive_paths(app.config)
    log_lines.configure(app.config["CLAUDEOPS_LOG_LEVEL"])
    migration_log.install()
    # APScheduler tells of every run of the scheduler's heartbeat at INFO.
    logging.getLogger("apscheduler").setLevel(
        logging.NOTSET if app.config["CLAUDEOPS_LOG_LEVEL"] == "DEBUG" else logging.WARNING)
    app.config["SQLALCHEMY_DATABASE_URI"] = service_url(app.config["CLAUDEOPS_DATABASE_URL"])
    left_in_the_instance_folder(app.config["CLAUDEOPS_DATABASE_URL"], app.instance_path)
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {**engine_options(app.config["SQLALCHEMY_DATABASE_URI"]),
                                               **app.config.get("SQLALCHEMY_ENGINE_OPTIONS", {})}
    # Flask's defaults hold SECRET_KEY=None; with none set, the state directory's.
    app.config["SECRET_KEY"] = app.config.get("SECRET_KEY") or app.config["CLAUDEOPS_SECRET_KEY"]
    if make_state:
        state_dir.make(app)
    elif not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = state_dir.kept_secret_key(app.config)
    app.config.setdefault("WTF_CSRF_TIME_LIMIT", None)
    _secure_the_session_cookie(app)
    proxies = app.config["CLAUDEOPS_TRUSTED_PROXIES"]
    if proxies:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies)
    # Before anything is stored or run: every text written to the database,
    # the run logs and the CLI's prompts passes it.
    redaction.init_app(app)
    db_redaction.install()

    db.init_app(app)
    with app.app_context():
        state_dir.guard_database(app, db.engine)
        dispose_at_exit(db.engine)
    plugin_migration_dirs = [(plugin, str(directory)) for plugin, directory
                             in call_at_startup(pm, "claudeops_migration_dirs", (str, os.PathLike))]
    _refuse_missing_migration_dirs(plugin_migration_dirs)
    app.extensions["claudeops.migration_dirs"] = [directory for _, directory in plugin_migration_dirs]
    migrate.init_app(app, db, directory=str(MIGRATIONS_DIR))
    check_revision_graph(app, MIGRATIONS_DIR / "versions", plugin_migration_dirs)
    from app.auth import init_auth
    # The login check before the CSRF check: a form posted after the login
    # expired goes to the login page, not to an error about its token.
    init_auth(app)
    from app.web import API_PREFIX
    from app.web.request_body import register_body_checks
    register_body_checks(app, API_PREFIX)   # before the CSRF check reads a form
    csrf.init_app(app)
    from app.limit_store import STORAGE_URI   # registers the storage's scheme
    app.config.setdefault("RATELIMIT_STORAGE_URI", STORAGE_URI)
    limiter.init_app(app)
    _add_plugin_commands(app, call_at_startup(pm, "claudeops_cli_commands", click.Command))

    from app import models  # noqa: F401  (the host's tables join the metadata)
    from app.web import register_web
    register_web(app, pm)
    return app


def _add_plugin_commands(app: Flask, commands: list[tuple[str, click.Command]]) -> None:
    """Each plugin's commands beside the host's, or a clash stops the start:
    click keeps one command per name, so one of the two would be missing."""
    from app.cli import main   # the host's commands; app.cli imports this module
    owners = {name: "the host" for name in [*main.commands, "db"]}
    for plugin, command in commands:
        if command.name in owners:
            raise PluginError(f"{owners[command.name]} and plugin {plugin} both have a command {command.name!r}; "
                              "each needs a name of its own")
        owners[command.name] = f"plugin {plugin}"
        app.cli.add_command(command)


@migrate.configure
def _plugin_version_locations(config):
    """Plugins' own revision directories join the host's (claudeops_migration_dirs)."""
    extra = current_app.extensions.get("claudeops.migration_dirs", [])
    if extra:
        config.set_main_option("path_separator", "os")
        config.set_main_option("version_locations", os.pathsep.join([str(MIGRATIONS_DIR / "versions"), *extra]))
    return config


class _SessionInterface(SecureCookieSessionInterface):
    """Marks the cookie Secure whenever the request came over TLS, directly or
    through a trusted proxy (CLAUDEOPS_TRUSTED_PROXIES): a login made over
    https is never sent back over plain http, and a loopback setup without TLS
    still works."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


def _secure_the_session_cookie(app: Flask) -> None:
    app.session_interface = _SessionInterface()
    app.config.update(SESSION_COOKIE_NAME="claudeops_session", SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Lax",
                      PERMANENT_SESSION_LIFETIME=timedelta(hours=app.config["CLAUDEOPS_LOGIN_HOURS"]),
                      # The cookie keeps the expiry of the login; a page that
                      # polls every few seconds would otherwise push it on forever.
                      SESSION_REFRESH_EACH_REQUEST=False)


def _plugin_settings(pm) -> tuple[Setting, ...]:
    """The plugins' settings. One named like the host's or another plugin's
    stops the start, naming both: it would take the other's place without a
    word (its default, its parser, whether it may change at run time). So
    does a name outside ``CLAUDEOPS_*``, the service's own variables."""
    declared = call_at_startup(pm, "claudeops_settings", Setting)
    declared_by = {setting.name: "the host" for setting in SETTINGS}
    # In the order the plugins were registered: the newcomer is named as the one at fault.
    for plugin, setting in reversed(declared):
        if not setting.name.startswith("CLAUDEOPS_"):
            raise PluginError(f"plugin {plugin} declares the setting {setting.name!r}: "
                              "a setting's name begins with CLAUDEOPS_")
        if setting.name in declared_by:
            raise PluginError(f"plugin {plugin} declares the setting {setting.name}, "
                              f"which {declared_by[setting.name]} declares already")
        declared_by[setting.name] = f"plugin {plugin}"
    return tuple(setting for _, setting in declared)


def _refuse_missing_migration_dirs(plugin_dirs: list[tuple[str, str]]) -> None:
    """A plugin's revisions in a directory that is not there (a typo, a path
    relative to wherever the command runs, a folder its package leaves out)
    stop the start, naming it: Alembic would pass it over in silence, and the
    plugin's tables would then be missing, or the database at a revision
    "this installation does not know", with no word of why."""
    for plugin, directory in plugin_dirs:
        if not os.path.isabs(directory):
            raise PluginError(f"plugin {plugin}: claudeops_migration_dirs returned {directory!r}, which is not an "
                              "absolute path (build it from the module's __file__)")
        if not os.path.isdir(directory):
            raise PluginError(f"plugin {plugin}: claudeops_migration_dirs returned {directory}, which is not a "
                              "directory (is it in the package's data?)")
