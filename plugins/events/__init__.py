"""Events: the agent reports what it saw with ``[EVENT:level:service] message``;
each marker becomes a row, shown on the Events page and in the API."""
from __future__ import annotations

from datetime import timedelta

from sqlalchemy import func, select

from app.extensions import db
from app.hookspecs import hookimpl
from app.plugin_types import DashboardPage, MarkerRecord, OverviewCard, PromptSection
from app.timeutil import utcnow
from plugins.events import staging
from plugins.events.markers import parse_event_markers
from plugins.events.models import Event

PROMPT = """## Reporting events

Report what you observe with event markers in your own text (never inside a tool command), one per line:

    [EVENT:info:<service>] <message>
    [EVENT:warning:<service>] <message>
    [EVENT:critical:<service>] <message>

`<service>` is optional (`[EVENT:info] <message>` for the whole system). Use info for routine
results, warning for degraded but working, critical for down or losing data. Each marker is
recorded as you write it and shown to the operator."""


@hookimpl
def claudeops_markers(text, run):
    markers = parse_event_markers(text)
    if not markers:
        return None
    now = utcnow()
    staging.stage([{"session_id": run.session_id, "tier": run.tier, "level": marker.level,
                    "service": marker.service, "message": marker.message, "created_at": now}
                   for marker in markers])
    return [MarkerRecord("event", f"{marker.level}:{marker.service}" if marker.service else marker.level,
                         marker.message) for marker in markers]


@hookimpl
def claudeops_notice(level, message, service, run):
    db.session.add(Event(session_id=run.session_id if run else None, tier=run.tier if run else None,
                         level=level if level in ("info", "warning", "critical") else "info",
                         service=service, message=message[:2000], created_at=utcnow()))


@hookimpl
def claudeops_stats():
    since = utcnow() - timedelta(hours=24)
    return {"critical_events_24h": db.session.scalar(
        select(func.count()).select_from(Event).where(Event.level == "critical", Event.created_at >= since))}


@hookimpl
def claudeops_prompt_context(run):
    return PromptSection(name="events", text=PROMPT, position=100)


@hookimpl
def claudeops_dashboard_pages():
    from plugins.events.views import pages
    return [DashboardPage("Events", "events.index", pages, position=20)]


@hookimpl
def claudeops_api_blueprints():
    from plugins.events.views import api
    return [api]


@hookimpl
def claudeops_overview_cards():
    since = utcnow() - timedelta(hours=24)
    counts = dict(db.session.execute(select(Event.level, func.count()).where(Event.created_at >= since)
                                     .group_by(Event.level)).all())
    critical = counts.get("critical", 0)
    return [OverviewCard("Events in 24 h", str(sum(counts.values())),
                         f"{critical} critical, {counts.get('warning', 0)} warning", "events.index",
                         position=20, tone="bad" if critical else "warn" if counts.get("warning") else "neutral")]
