"""The plugin manager: built-in plugins by name, third-party ones by entry point.

A fresh manager is made for every application (never a module global), so a
test can register a plugin for one app without it leaking into the next.
"""
from __future__ import annotations

import importlib
import logging
from typing import Any, Iterable

import pluggy
from flask import current_app

from app import hookspecs
from app.dbfaults import storage_fault
from app.extensions import db

log = logging.getLogger(__name__)

# Third-party packages declare their plugin module under this group:
#   [project.entry-points."claudeops.plugins"]
#   incidents = "claudeops_incidents"
ENTRY_POINT_GROUP = "claudeops.plugins"

# The host's own pages and cards use the same hooks as everyone else.
HOST_PLUGINS = ("app.web.host_pages",)

# Built-in marker plugins, registered in this order; each uses only public hooks.
BUILTIN_PLUGINS = ("plugins.events", "plugins.memory", "plugins.escalation", "plugins.cooldowns")


def make_plugin_manager(extra_plugins: Iterable[Any] = (), load_entry_points: bool = True) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    # Historic: every plugin registered from here on may add hookspecs of its own.
    pm.hook.claudeops_add_hookspecs.call_historic(kwargs={"pluginmanager": pm})
    for name in HOST_PLUGINS + BUILTIN_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if load_entry_points:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    for plugin in extra_plugins:
        pm.register(plugin)
    pm.check_pending()
    return pm


def plugin_manager() -> pluggy.PluginManager:
    """The current application's plugin manager."""
    return current_app.extensions["claudeops.plugins"]


def call_each(hook_name: str, commit_each: bool = False, **kwargs: Any) -> list[Any]:
    """Call every implementation of a hook on its own, in pluggy's order.

    Unlike ``pm.hook.X(...)``, an implementation that raises is logged and
    skipped instead of aborting the others: one faulty plugin must not cost a
    session its events or the operator their dashboard. ``None`` results are
    dropped, as pluggy does.

    With ``commit_each``, what each implementation added to the database
    session is committed after it returns and rolled back if it raised, so a
    faulty plugin loses only its own rows.

    A database that cannot store anything (locked, full, read-only) is not
    the plugin's fault: that error is raised to the caller, so a session ends
    with a clear reason instead of running on while every record is dropped.
    """
    caller = getattr(plugin_manager().hook, hook_name)
    if commit_each:
        db.session.commit()   # the caller's own changes are no plugin's to lose
    results = []
    for impl in reversed(caller.get_hookimpls()):
        if impl.hookwrapper or impl.wrapper:
            continue  # wrappers need pluggy's own call loop; these hooks do not offer them
        try:
            result = impl.function(*(kwargs[name] for name in impl.argnames))
            if commit_each:
                # In the try: a row the database refuses only now is this plugin's failure too.
                db.session.commit()
        except Exception as exc:
            if commit_each:
                db.session.rollback()
            if storage_fault(exc):
                raise
            log.exception("plugin %s failed in %s", impl.plugin_name, hook_name)
            continue
        if result is not None:
            results.append(result)
    return results


def flatten(results: Iterable[Any]) -> list[Any]:
    """Hooks may return one item or a list of items; give one flat list."""
    flat: list[Any] = []
    for result in results:
        if isinstance(result, (list, tuple)):
            flat.extend(result)
        else:
            flat.append(result)
    return flat
