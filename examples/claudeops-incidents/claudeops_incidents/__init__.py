"""Incidents: the agent opens ``[INCIDENT:<severity>:<service>] summary`` and
closes ``[INCIDENT:resolved:<service>] summary`` incidents; they are kept in a
table of their own (with its own Alembic branch), listed on an Incidents page
and in ``GET /api/v1/incidents``, counted on the Overview, and every session is
told which incidents are open.

An example of a third-party Claude Ops plugin: installed with pip, found through
the ``claudeops.plugins`` entry point, and built only on the host's public API
(``app.hookspecs``, ``app.plugin_types``, ``app.extensions.db``,
``app.runtime``, ``app.timeutil``, ``app.web.apiutil``, ``app.web.apidoc``,
``app.web.htmx``).
This module holds only the hook implementations.
"""
from __future__ import annotations

import logging
from pathlib import Path

from app.hookspecs import hookimpl
from app.plugin_types import (POSITIVE_INT_SCHEMA, DashboardPage, MarkerRecord, OverviewCard, PromptSection, Setting,
                              positive_int, warn_once)
from app.runtime import setting

# Imported here so the table joins the host's metadata as soon as the plugin
# is loaded: the drift check then covers it.
from claudeops_incidents import store
from claudeops_incidents.markers import MARKER_TAG, parse_incident_markers
from claudeops_incidents.models import Incident  # noqa: F401

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
MAX_PER_SESSION = "CLAUDEOPS_INCIDENTS_MAX_PER_SESSION"

# Sidebar: after the built-ins (Events 20, Memories 30, Cooldowns 40).
PAGE_POSITION = 45
# System prompt: after events (100), memory (200) and cooldowns (300).
PROMPT_POSITION = 400


@hookimpl
def claudeops_migration_dirs():
    return [str(MIGRATIONS_DIR)]


@hookimpl
def claudeops_settings():
    return [Setting(MAX_PER_SESSION, "20",
                    "Most incidents one session may open; an opening marker beyond it is logged and noted in the "
                    "activity log, not stored (updating or resolving an open incident always counts).",
                    positive_int, runtime=True, schema=POSITIVE_INT_SCHEMA)]


@hookimpl
def claudeops_marker_tags():
    return [MARKER_TAG]


@hookimpl
def claudeops_markers(text, run):
    recorded, refused = [], 0
    limit = setting(MAX_PER_SESSION)   # a runtime setting: the operator may change it on /config
    for marker in parse_incident_markers(text, run.marker_tags):
        outcome = store.apply_marker(marker, run, max_opened=limit)
        if outcome is None:
            continue
        if outcome.action == store.REFUSED:
            refused += 1
            continue
        incident = outcome.incident
        label = f"{outcome.action}:{incident.severity}:{incident.service}"
        recorded.append(MarkerRecord("incident", label, f"#{incident.id} {marker.summary}".rstrip()))
    if refused:
        why = f"{refused} incident marker(s) not stored: the session reached {MAX_PER_SESSION}={limit}"
        warn_once(log, run.session_id, "incidents over the limit", why)   # once a session, then at debug
        recorded.append(MarkerRecord("incident", "not stored", why, stored=False))
    return recorded or None


@hookimpl
def claudeops_prompt_context(run):
    return PromptSection(name="incidents", text=store.prompt_text(), position=PROMPT_POSITION)


@hookimpl
def claudeops_dashboard_pages():
    from claudeops_incidents.views import pages
    return [DashboardPage("Incidents", "incidents.index", pages, position=PAGE_POSITION)]


@hookimpl
def claudeops_api_blueprints():
    from claudeops_incidents.views import api
    return [api]


@hookimpl
def claudeops_openapi_paths():
    from claudeops_incidents.openapi import openapi_paths
    return openapi_paths()


@hookimpl
def claudeops_overview_cards():
    counts = store.open_counts()
    total, critical = sum(counts.values()), counts.get("critical", 0)
    detail = ", ".join(f"{counts[s]} {s}" for s in ("critical", "major", "minor") if counts.get(s)) or "all clear"
    return [OverviewCard("Open incidents", str(total), detail, "incidents.index", position=PAGE_POSITION,
                         tone="bad" if critical else "warn" if total else "good")]


@hookimpl
def claudeops_stats():
    return {"open_incidents": sum(store.open_counts().values())}
