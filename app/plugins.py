"""The plugin manager: built-in plugins by name, third-party ones by entry point.

A fresh manager is made for every application (never a module global), so a
test can register a plugin for one app without it leaking into the next.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import logging
import re
import threading
from contextlib import suppress
from functools import partial
from typing import Any, Callable, Iterable, Iterator, Optional

import pluggy
from flask import current_app
from sqlalchemy.exc import SQLAlchemyError

from app import hookspecs, staged_rows
from app.dbfaults import roll_back, storage_fault, waiting_out
from app.extensions import db
from app.plugin_fault_log import log_fault

log = logging.getLogger(__name__)

# Third-party packages declare their plugin module under this group:
#   [project.entry-points."claudeops.plugins"]
#   incidents = "claudeops_incidents"
ENTRY_POINT_GROUP = "claudeops.plugins"

# The host's own pages and cards use the same hooks as everyone else.
HOST_PLUGINS = ("app.web.host_pages",)

# Built-in marker plugins, registered in this order; each uses only public hooks.
BUILTIN_PLUGINS = ("plugins.events", "plugins.memory", "plugins.escalation", "plugins.cooldowns")


class PluginError(RuntimeError):
    """A plugin is broken in a way the service cannot start with: a start-up
    hook raised, or what it declared cannot be wired (a sidebar link to no
    view, a blueprint name already taken). The message names the plugin."""


def make_plugin_manager(extra_plugins: Iterable[Any] = (), load_entry_points: bool = True,
                        disabled: frozenset[str] = frozenset()) -> pluggy.PluginManager:
    """The host's plugins, the built-in ones, the installed ones but those
    ``disabled`` names (CLAUDEOPS_DISABLE_PLUGINS), then ``extra_plugins``."""
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    # Historic: every plugin registered from here on may add hookspecs of its own.
    pm.hook.claudeops_add_hookspecs.call_historic(kwargs={"pluginmanager": pm})
    for name in HOST_PLUGINS + BUILTIN_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    if load_entry_points:
        installed = installed_plugin_names()
        _say_what_is_disabled(disabled, installed)
        _refuse_shared_names(disabled)
        for name in installed:
            if name not in disabled:
                _load_entry_point(pm, name)
    for plugin in extra_plugins:
        pm.register(plugin, name=_name_for(pm, plugin))
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        # pluggy names the plugin by its module's repr; the operator knows it by its name.
        reason = str(exc).split(" in plugin <", 1)[0]
        raise PluginError(f"plugin {pm.get_name(exc.plugin) or exc.plugin}: {reason}") from exc
    _refuse_wrappers(pm)
    _refuse_unmarked_hooks(pm)
    return pm


def _name_for(pm: pluggy.PluginManager, plugin: Any) -> str:
    """The name a plugin given as an object is logged by: its ``__name__``,
    else its class's, where pluggy would take ``id()``, a number no one
    knows it by. A second object of a class gets ``#2``, and so on."""
    name = getattr(plugin, "__name__", None) or f"{type(plugin).__module__}.{type(plugin).__qualname__}"
    unique, count = name, 1
    while pm.has_plugin(unique):
        count += 1
        unique = f"{name}#{count}"
    return unique


def _refuse_unmarked_hooks(pm: pluggy.PluginManager) -> None:
    """A function named like a hook but not marked ``@hookimpl`` stops the
    start: pluggy registers only marked ones, so it would never be called,
    and its plugin would seem to do nothing, with no word of why."""
    for name, plugin in pm.list_name_plugin():
        for attribute in dir(plugin):
            if (attribute.startswith(f"{hookspecs.PROJECT_NAME}_") and hasattr(pm.hook, attribute)
                    and callable(getattr(plugin, attribute, None))
                    and pm.parse_hookimpl_opts(plugin, attribute) is None):
                raise PluginError(f"plugin {name}: {attribute} is not marked @hookimpl "
                                  "(from app.hookspecs import hookimpl), so it would never be called")


def _refuse_wrappers(pm: pluggy.PluginManager) -> None:
    """A hook wrapper of a hook the host calls stops the start, naming the
    plugin and the hook: the host calls each implementation on its own (one
    that raises costs only its own results), so a wrapper, which needs
    pluggy's own call loop, would never be called, and no one would know."""
    for caller in vars(pm.hook).values():
        if not (isinstance(caller, pluggy.HookCaller) and _called_by_the_host(caller)):
            continue
        for impl in caller.get_hookimpls():
            if impl.hookwrapper or impl.wrapper:
                raise PluginError(f"plugin {impl.plugin_name}: {caller.name} is a hook wrapper, which the host "
                                  "never calls (it calls each implementation on its own); implement it plainly")


def _called_by_the_host(caller: pluggy.HookCaller) -> bool:
    """A hook of the host's or of a built-in plugin's: those the host calls.
    A hook an installed plugin declares is called as that plugin sees fit."""
    declared_in = getattr(caller.spec.namespace, "__name__", "") if caller.spec else ""
    return declared_in == hookspecs.__name__ or declared_in.startswith(tuple(f"{name}." for name in BUILTIN_PLUGINS))


def installed_plugin_names() -> list[str]:
    """The entry points' names of the installed plugins, in the order
    Python lists their distributions."""
    return list(dict.fromkeys(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)))


def _refuse_shared_names(disabled: frozenset[str]) -> None:
    """One plugin name declared by two installed packages (or a built-in
    plugin's) stops the start: pluggy would load the first it met and skip
    the other without a word, which one depending on the order of the
    installation's directories."""
    # Name → distribution → module: one package found twice (on two paths) is one.
    declared_by: dict[str, dict[str, str]] = {}
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        distribution = entry_point.dist.name if entry_point.dist else "a package of unknown name"
        declared_by.setdefault(entry_point.name, {}).setdefault(distribution, entry_point.value)
    for name, declared in declared_by.items():
        if name in HOST_PLUGINS + BUILTIN_PLUGINS:
            raise PluginError(f"plugin {name}: the package {', '.join(declared)} declares an entry point "
                              "named as a built-in plugin, which would never be loaded; rename it")
        if len(declared) > 1 and name not in disabled:
            raise PluginError(f"plugin {name} is declared by more than one installed package: "
                              + "; ".join(f"{dist} ({module})" for dist, module in sorted(declared.items()))
                              + ". Only one could be loaded: uninstall one of them, or rename its entry point")


def _say_what_is_disabled(disabled: frozenset[str], installed: list[str]) -> None:
    for name in sorted(disabled):
        if name in installed:
            log.warning("plugin %s is not loaded: CLAUDEOPS_DISABLE_PLUGINS names it", name)
        else:   # uninstalled since, or a typo: the plugin it meant may well be loaded
            log.warning("CLAUDEOPS_DISABLE_PLUGINS names %s, which is not an installed plugin (installed: %s; "
                        "built-in plugins cannot be disabled)", name, ", ".join(installed) or "none")


def how_to_start_without(message: str) -> str:
    """A start-up error's message, with how to start without the installed
    plugin(s) it names, which an operator may not be able to fix at once."""
    named = [name for name in installed_plugin_names() if re.search(rf"\bplugin {re.escape(name)}(?![\w.-])", message)]
    if not named:
        return message
    return f"{message} (CLAUDEOPS_DISABLE_PLUGINS={','.join(named)} starts the service without " \
           f"{'it' if len(named) == 1 else 'them'})"


def _load_entry_point(pm: pluggy.PluginManager, name: str) -> None:
    """Import and register one installed plugin, or stop the start saying which."""
    try:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=name)
    except Exception as exc:
        raise PluginError(f"plugin {name} could not be loaded: {type(exc).__name__}: {exc}") from exc


def plugin_manager() -> pluggy.PluginManager:
    """The current application's plugin manager."""
    return current_app.extensions["claudeops.plugins"]


def call_each(hook_name: str, commit_each: bool = False, shutdown: Optional[threading.Event] = None,
              **kwargs: Any) -> list[Any]:
    """Call every implementation of a hook on its own, in pluggy's order.

    Unlike ``pm.hook.X(...)``, an implementation that raises is logged and
    skipped instead of aborting the others: one faulty plugin must not cost a
    session its events or the operator their dashboard. ``None`` results are
    dropped, as pluggy does.

    With ``commit_each``, what each implementation added to the database
    session is committed after it returns and rolled back if it raised, so a
    faulty plugin loses only its own rows.

    A database that cannot store anything (locked, full, read-only) is not
    the plugin's fault: that error is raised to the caller (its
    ``claudeops_plugin`` names the implementation that met it), so a session
    ends with a clear reason instead of running on while every record is dropped.
    With ``commit_each`` and ``shutdown`` (the event that ends a wait when the
    service stops), a database server that went away for a moment is waited
    for instead: the implementation that met it is called again once it is
    back (``dbfaults.waiting_out``), the ones before it not.
    """
    return [result for _, result in results_by_plugin(hook_name, commit_each, shutdown, **kwargs)]


def results_by_plugin(hook_name: str, commit_each: bool = False, shutdown: Optional[threading.Event] = None,
                      **kwargs: Any) -> list[tuple[str, Any]]:
    """``call_each``, each result with the name of the plugin that gave it."""
    return list(_each_result(hook_name, commit_each, kwargs, shutdown))


def call_first(hook_name: str, expected: type | tuple[type, ...] = object,
               meaningful: Optional[Callable[[Any], Any]] = None, **kwargs: Any) -> Any:
    """The first answer that is not ``None``, asking each implementation on
    its own in pluggy's order, for a ``firstresult`` hook: one that raises is
    logged and the next one is asked, where ``pm.hook.X(...)`` would give up
    on them all; so is one whose answer is not of the ``expected`` type, or
    for which ``meaningful`` is false (an empty reason would otherwise
    silence the plugins after it), the warning naming the plugin. ``None``
    when nobody answers."""
    for plugin, result in _each_result(hook_name, False, kwargs):
        if not isinstance(result, expected):
            log_fault(log, plugin, hook_name, "wrong type",
                      "plugin %s returned %s from %s, not %s; ignored, the next plugin is asked",
                      plugin, type(result).__name__, hook_name, _type_names(expected))
        elif meaningful is not None and not meaningful(result):
            log_fault(log, plugin, hook_name, "says nothing",
                      "plugin %s returned %r from %s, which says nothing; ignored, the next plugin is asked",
                      plugin, result, hook_name)
        else:
            return result
    return None


def collect(hook_name: str, expected: type | tuple[type, ...], **kwargs: Any) -> list[Any]:
    """Every implementation's items (one returned, or a list of them) as one
    list, in pluggy's order, as ``call_each`` calls them; an item not of the
    ``expected`` type is logged, naming its plugin, and left out."""
    return [item for plugin, result in results_by_plugin(hook_name, **kwargs)
            for item in of_type(plugin, hook_name, result, expected)]


def _each_result(hook_name: str, commit_each: bool, kwargs: dict[str, Any],
                 shutdown: Optional[threading.Event] = None) -> Iterator[tuple[str, Any]]:
    """(plugin name, result) of each implementation as it is called: a
    caller that stops reading calls no more of them."""
    caller = getattr(plugin_manager().hook, hook_name)
    if commit_each:
        db.session.commit()   # the caller's own changes are no plugin's to lose
    for impl in _callable_impls(caller):
        try:
            if commit_each and shutdown is not None:
                result = waiting_out(partial(_call_and_commit, impl, kwargs),
                                     f"plugin {impl.plugin_name} in {hook_name}", shutdown)
            elif commit_each:
                result = _call_and_commit(impl, kwargs)
            else:
                result = _call_alone(impl, kwargs)
        except Exception as exc:
            if commit_each:
                roll_back()   # on what a server that went away left of the connection too
            if storage_fault(exc):
                exc.claudeops_plugin = impl.plugin_name   # for the caller to say whose write it refused
                raise
            log_fault(log, impl.plugin_name, hook_name, type(exc).__name__, "plugin %s failed in %s",
                      impl.plugin_name, hook_name, exc_info=True)
            continue
        if result is not None:
            yield impl.plugin_name, result


def _call_alone(impl: Any, kwargs: dict[str, Any]) -> Any:
    """One implementation's result, its failure costing no one else theirs.

    On PostgreSQL a statement that fails aborts the whole transaction: the
    implementations after this one, and the caller (a session recording its
    escalation, a batch of markers), would fail on every statement until it
    is rolled back. So there each call runs in a savepoint, rolled back if it
    raises, and with it what the implementation wrote. SQLite takes back only
    the failed statement and the transaction goes on, so no savepoint is taken
    there: one around every call would cost more than most calls do (the
    memory matcher is asked for every marker). On both, the rows it staged
    for the commit (app/staged_rows.py) are taken back."""
    staged = staged_rows.mark()
    session = db.session()
    savepoint = None if session.get_bind().dialect.name == "sqlite" else session.begin_nested()
    try:
        result = impl.function(*(kwargs[name] for name in impl.argnames))
        if savepoint is not None and savepoint.is_active:   # not if the plugin committed on its own
            savepoint.commit()   # RELEASE; its rows reach the database in its own turn
        return result
    except Exception:
        if savepoint is not None:
            with suppress(SQLAlchemyError):   # closed by the plugin, or a connection gone
                savepoint.rollback()
        staged_rows.undo(staged)
        raise


def _call_and_commit(impl: Any, kwargs: dict[str, Any]) -> Any:
    result = impl.function(*(kwargs[name] for name in impl.argnames))
    # A row the database refuses only now is this implementation's failure too.
    db.session.commit()
    return result


def call_at_startup(pm: pluggy.PluginManager, hook_name: str,
                    expected: type | tuple[type, ...]) -> list[tuple[str, Any]]:
    """Every item a start-up hook's implementations return, each with its
    plugin's name, in pluggy's order; an item not of the ``expected`` type
    is logged and left out, as at run time.

    An implementation that raises stops the start with a ``PluginError``
    naming the plugin and the hook: a service missing a plugin's settings,
    pages or tables would fail later, and less clearly, and an operator sees
    a broken plugin at once. (Hooks called while the service runs are
    isolated instead: see ``call_each``.)
    """
    items = []
    for impl in _callable_impls(getattr(pm.hook, hook_name)):
        try:
            result = impl.function()
        except Exception as exc:
            raise PluginError(f"plugin {impl.plugin_name} failed in {hook_name}: "
                              f"{type(exc).__name__}: {exc}") from exc
        items.extend((impl.plugin_name, item) for item in of_type(impl.plugin_name, hook_name, result, expected))
    return items


def _callable_impls(caller: Any) -> list[Any]:
    """The hook's implementations in pluggy's calling order (the last
    registered first), wrappers left out: they need pluggy's own call loop,
    and none of these hooks offers them."""
    return [impl for impl in reversed(caller.get_hookimpls()) if not (impl.hookwrapper or impl.wrapper)]


def of_type(plugin: str, hook_name: str, result: Any, expected: type | tuple[type, ...]) -> list[Any]:
    """``result`` (``None``, one item or a list of items) as a list of the
    items of the ``expected`` type; any other is logged as a warning that
    names the plugin, instead of vanishing without a word."""
    kept = []
    for item in flatten([] if result is None else [result]):
        if isinstance(item, expected):
            kept.append(item)
        else:
            log_fault(log, plugin, hook_name, "wrong type", "plugin %s returned %s from %s, not %s; ignored",
                      plugin, type(item).__name__, hook_name, _type_names(expected))
    return kept


def _type_names(expected: type | tuple[type, ...]) -> str:
    return " or ".join(kind.__name__ for kind in (expected if isinstance(expected, tuple) else (expected,)))


def flatten(results: Iterable[Any]) -> list[Any]:
    """Hooks may return one item or a list of items; give one flat list."""
    flat: list[Any] = []
    for result in results:
        if isinstance(result, (list, tuple)):
            flat.extend(result)
        else:
            flat.append(result)
    return flat
