"""Which schema revisions this installation (the host and its plugins) has:
a database at a revision it lacks was migrated by a newer Claude Ops, or by
a plugin no longer installed, and Alembic would only say it cannot locate it."""
from __future__ import annotations

import logging
import sys
from types import ModuleType
from typing import Callable

from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from flask import Flask
from sqlalchemy import inspect
from sqlalchemy.exc import OperationalError

from app.database_url import shown_url
from app.extensions import db

log = logging.getLogger(__name__)


def known_revision(app: Flask) -> Callable[[str], bool]:
    """Whether this installation has a schema revision."""
    script = ScriptDirectory.from_config(app.extensions["migrate"].migrate.get_config())

    def known(revision: str) -> bool:
        try:
            return script.get_revision(revision) is not None
        except CommandError:
            return False
    return known


def newer_schema(shown_url: str, unknown: list[str], disabled: frozenset[str] = frozenset()) -> str:
    """Why a database at ``unknown`` revisions is not used, and the ways back."""
    why = (f"the database {shown_url} is at schema revision {', '.join(unknown)}, which this installation does "
           "not know. ")
    if disabled:   # a disabled plugin's revisions are unknown too; the rest has revisions to run
        why += (f"If it is that of a plugin CLAUDEOPS_DISABLE_PLUGINS leaves out ({', '.join(sorted(disabled))}): "
                "this installation's own revisions cannot be run without it, so load it again for the upgrade "
                "(fix it, or take it out of CLAUDEOPS_DISABLE_PLUGINS). Otherwise: ")
    return why + ("Either a newer version of Claude Ops migrated it: install that version again, or restore "
                  "the backup taken before the upgrade (`claudeops restore`; PostgreSQL: pg_restore). Or a plugin "
                  "whose tables are in it was uninstalled: reinstall it, and run `claudeops db downgrade "
                  "<branch>@base` (with the service stopped) before removing it")


def disabled_installed(app: Flask) -> frozenset[str]:
    """The installed plugins CLAUDEOPS_DISABLE_PLUGINS leaves out: only an
    installed plugin can be, and a name that is none (a typo) sets nothing
    aside, nor is it named as a plugin left out."""
    from app.plugins import installed_plugin_names
    return frozenset(app.config.get("CLAUDEOPS_DISABLE_PLUGINS") or ()) & frozenset(installed_plugin_names())


def refused_revisions(app: Flask, unknown: list[str]) -> list[str]:
    """Of the revisions the database is at that this installation lacks
    (``unknown``, from ``unknown_revisions``), those that keep it from using
    the database: all, but for those taken to be a disabled
    plugin's (CLAUDEOPS_DISABLE_PLUGINS): while some plugin is disabled and
    every other revision is at this installation's heads, the unknown ones
    are that plugin's branch, set aside with it (logged), and there is
    nothing to migrate. Alembic cannot run any revision while the database
    names one it cannot locate, so with revisions to run they are refused."""
    if not unknown:
        return unknown
    disabled = disabled_installed(app)
    if not disabled:
        return unknown
    with db.engine.connect() as connection:
        current = set(MigrationContext.configure(connection).get_current_heads())
    if current - set(unknown) != _heads(app):
        return unknown
    log.warning("schema revision(s) %s, which this installation does not know, taken to be those of the "
                "plugin(s) CLAUDEOPS_DISABLE_PLUGINS leaves out (%s); their tables are left as they are",
                ", ".join(unknown), ", ".join(sorted(disabled)))
    return []


def set_aside(app: Flask, unknown: list[str]) -> str:
    """What the database's revisions are when ``unknown`` are those of the
    plugins CLAUDEOPS_DISABLE_PLUGINS leaves out and the rest is at this
    installation's heads (``refused_revisions`` found nothing to refuse)."""
    return (f"the database {shown_url(db.engine.url)} is at this version's schema "
            f"({', '.join(sorted(_heads(app)))}); its revision(s) {', '.join(unknown)} are taken to be those of "
            f"the plugin(s) CLAUDEOPS_DISABLE_PLUGINS leaves out ({', '.join(sorted(disabled_installed(app)))}), "
            "which are left as they are")


def _heads(app: Flask) -> set[str]:
    return set(ScriptDirectory.from_config(app.extensions["migrate"].migrate.get_config()).get_heads())


def heads_of_database(app: Flask) -> tuple[str, ...]:
    """The revisions the database is at (one for each branch)."""
    # Its words on configuring (the dialect, transactional DDL) are dropped
    # below DEBUG (app/migration_log.py): no news before every command.
    with db.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_heads()


def unknown_revisions(app: Flask) -> list[str]:
    """The revisions the database is at that this installation lacks."""
    known = known_revision(app)
    return sorted(revision for revision in heads_of_database(app) if not known(revision))


def dashboard_refusal(app: Flask) -> str | None:
    """Why a dashboard must not serve this database, or None: a newer version
    migrated it, or it is not at this version's schema yet (the scheduler's
    host migrates it as it starts). Its pages would write rows whose meaning
    they do not know, or fail on tables that are not there. A database that
    does not answer is no reason: the pages say so themselves."""
    with app.app_context():
        url = shown_url(db.engine.url)
        try:
            unknown = unknown_revisions(app)
            if refused_revisions(app, unknown):
                return newer_schema(url, unknown, disabled_installed(app))
            with db.engine.connect() as connection:
                current = set(MigrationContext.configure(connection).get_current_heads()) - set(unknown)
        except OperationalError:
            return None
        needed = _heads(app)
    if current == needed:
        return None
    return (f"the database {url} is not at this version's schema yet (at {', '.join(sorted(current)) or 'none'}; "
            f"this version needs {', '.join(sorted(needed))}): start the scheduler's host, which migrates it "
            "(`claudeops serve` or `claudeops scheduler`), or run `claudeops db upgrade heads` with it stopped")


def schema_not_created(app: Flask) -> dict[str, list[str]]:
    """The tables of the host's and each installed plugin's models that the
    database lacks once migrated, and the columns of the tables it has
    (``table.column``), by who owns them ("the host", or "plugin <name>"):
    models a plugin defines, or columns it adds to one, with no revision
    that creates them. A plugin's models are those of its package: the
    module's (an entry point's, a built-in's), or that of the module which
    defines the class the plugin is, or is an instance of."""
    owners = {"app": "the host"}
    for name, plugin in app.extensions["claudeops.plugins"].list_name_plugin():
        module = _module_of(plugin)
        if module is not None:
            owners.setdefault(_package_of(module), f"plugin {name}")
    inspector = inspect(db.engine)
    present = set(inspector.get_table_names())
    missing: dict[str, set[str]] = {}
    for mapper in db.Model.registry.mappers:
        table = mapper.local_table
        owner = _owner(mapper.class_.__module__, owners)
        if owner is None:
            continue
        if table.name not in present:
            missing.setdefault(owner, set()).add(table.name)
            continue
        columns = {column["name"] for column in inspector.get_columns(table.name)}
        missing.setdefault(owner, set()).update(f"{table.name}.{column.name}" for column in table.columns
                                                if column.name not in columns)
    return {owner: sorted(names) for owner, names in missing.items() if names}


def schema_no_revision_creates(app: Flask) -> str | None:
    """Why the database, at every head of this installation, still lacks a
    table or column of a model (``schema_not_created``), or None: migrating
    again would not help, a plugin lacks a revision."""
    with db.engine.connect() as connection:
        current = set(MigrationContext.configure(connection).get_current_heads())
    known = known_revision(app)   # a disabled plugin's revision, set aside, is no head of this installation
    if {revision for revision in current if known(revision)} != _heads(app):
        return None
    missing = schema_not_created(app)
    if not missing:
        return None
    named = "; ".join(f"{owner}: {', '.join(names)}" for owner, names in sorted(missing.items()))
    return (f"tables or columns missing after migrating ({named}): no revision creates them: a plugin ships its "
            "own, for every table and column its models add (docs/plugins.md, Tables)")


def _module_of(plugin: object) -> ModuleType | None:
    if isinstance(plugin, ModuleType):
        return plugin
    defined_in = (plugin if isinstance(plugin, type) else type(plugin)).__module__
    return sys.modules.get(defined_in)


def _package_of(module: ModuleType) -> str:
    return module.__name__ if hasattr(module, "__path__") else module.__name__.rpartition(".")[0] or module.__name__


def _owner(module_name: str, owners: dict[str, str]) -> str | None:
    for package in sorted(owners, key=len, reverse=True):   # the innermost package first
        if module_name == package or module_name.startswith(package + "."):
            return owners[package]
    return None
