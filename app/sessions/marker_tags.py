"""The tags the installed plugins' markers begin with (``claudeops_marker_tags``).

The fan-out gives a plugin only the text blocks that hold one of its own
tags (app/sessions/fanout.py); every hook of a session is told all of them
(``RunInfo.marker_tags``), since a marker's text ends at the next of them
(app/marker_text.py).
"""
from __future__ import annotations

import logging

from app.plugin_fault_log import log_fault
from app.plugins import plugin_manager

log = logging.getLogger(__name__)

HOOK = "claudeops_marker_tags"


def tags_by_plugin() -> dict[str, tuple[str, ...]]:
    """Each plugin's marker tags; a plugin whose answer is unusable is left
    out, and so given every block."""
    tags = {}
    for impl in getattr(plugin_manager().hook, HOOK).get_hookimpls():
        try:
            answer = impl.function()
        except Exception as exc:
            log_fault(log, impl.plugin_name, HOOK, type(exc).__name__,
                      "plugin %s failed in %s; it is given every text block", impl.plugin_name, HOOK,
                      exc_info=True)
            continue
        if answer is None:
            continue
        if not isinstance(answer, (list, tuple)) or not all(isinstance(tag, str) and tag for tag in answer):
            log_fault(log, impl.plugin_name, HOOK, "wrong type",
                      "plugin %s: %s must return a list of non-empty strings, not %r; it is given every text block",
                      impl.plugin_name, HOOK, answer)
            continue
        tags[impl.plugin_name] = tuple(answer)
    return tags


def installed_tags(by_plugin: dict[str, tuple[str, ...]] | None = None) -> tuple[str, ...]:
    """Every plugin's tags together, in one order whatever the plugins' order."""
    by_plugin = tags_by_plugin() if by_plugin is None else by_plugin
    return tuple(sorted({tag for tags in by_plugin.values() for tag in tags}))
