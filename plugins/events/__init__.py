"""Events: the agent reports what it saw with ``[EVENT:level:service] message``;
each marker becomes a row, shown on the Events page and in the API."""
from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import func, select

from app.batched_delete import prune_rows
from app.db_redaction import redacted_values
from app.extensions import db
from app.hookspecs import hookimpl
from app.plugin_types import (POSITIVE_INT_SCHEMA, RETENTION_DAYS_SCHEMA, DashboardPage, MarkerRecord, OverviewCard,
                              PromptSection, Setting, SkippedMarkers, positive_int, retention_days)
from app.runtime import setting
from app.session_warnings import warn_of_cut_messages, warn_once
from app.timeutil import utcnow
from plugins.events import staging
from plugins.events.markers import MARKER_TAGS, MAX_SERVICE_CHARS, parse_event_markers
from plugins.events.models import Event
from plugins.events.relevance import services_in_trouble

PROMPT = """## Reporting events

Report what you observe with event markers in your own text (never inside a tool command), one per line:

    [EVENT:info:<service>] <message>
    [EVENT:warning:<service>] <message>
    [EVENT:critical:<service>] <message>

`<service>` is optional (`[EVENT:info] <message>` for the whole system); it is letters, digits,
`_`, `-`, `.`, `@` and `/` (no port, no spaces). Use info for routine
results, warning for degraded but working, critical for down or losing data. Each marker is
recorded as you write it and shown to the operator."""

log = logging.getLogger(__name__)

MAX_PER_SESSION = "CLAUDEOPS_EVENTS_MAX_PER_SESSION"
RETENTION = "CLAUDEOPS_EVENT_RETENTION_DAYS"


@hookimpl
def claudeops_settings():
    return [Setting(MAX_PER_SESSION, "100",
                    "Most event markers one session may record, counting the service's own notices of the "
                    "session; markers beyond it are logged and noted in the activity log, not stored. Notices are "
                    "always stored, so with them a session may hold more events.", positive_int, runtime=True,
                    schema=POSITIVE_INT_SCHEMA),
            Setting(RETENTION, "365",
                    "Days an event is kept; older ones are deleted daily. 0 keeps them forever.",
                    retention_days, runtime=True, schema=RETENTION_DAYS_SCHEMA)]


@hookimpl
def claudeops_prune(now, dry_run, batch_size):
    days = setting(RETENTION)
    if not days:
        return None
    old = [Event.created_at < now - timedelta(days=days)]   # ix_events_created_at
    return {"events": prune_rows(Event, old, dry_run, batch_size)}


@hookimpl
def claudeops_marker_tags():
    return list(MARKER_TAGS)


@hookimpl
def claudeops_markers(text, run):
    skipped = SkippedMarkers(log, run, "event")
    markers = parse_event_markers(text, skipped, run.marker_tags)
    if not markers:
        return skipped.records() or None
    limit = setting(MAX_PER_SESSION)
    # Every event of the session counts, the service's own notices included.
    room = max(0, limit - staging.session_count(run.session_id))
    kept, refused = markers[:room], len(markers) - room
    warn_of_cut_messages(log, run.session_id, kept, "event")
    now = utcnow()
    staging.stage([{"session_id": run.session_id, "tier": run.tier, "level": marker.level,
                    "service": marker.service, "message": marker.message, "created_at": now}
                   for marker in kept])
    recorded = [MarkerRecord("event", f"{marker.level}:{marker.service}" if marker.service else marker.level,
                             marker.message) for marker in kept]
    if refused > 0:
        why = f"{refused} event marker(s) not stored: the session reached {MAX_PER_SESSION}={limit}"
        warn_once(log, run.session_id, "events over the limit", why)
        recorded.append(MarkerRecord("event", "not stored", why, stored=False))
    return recorded + skipped.records()


@hookimpl(tryfirst=True)
def claudeops_markers_flush(run):
    # The batch's event rows before any other plugin writes its batch: once
    # written, a plugin failing after them rolls back to a mark past them.
    staging.write_staged(db.session())


@hookimpl
def claudeops_notice(level, message, service, run):
    # Staged like a marker's row (written when the transaction commits), so
    # redacted here as the ORM's flush would have redacted it, then cut to the
    # columns' lengths: PostgreSQL refuses a longer value, and with it the batch.
    # Cut first, a secret running past the cut would be kept by its first half.
    row = redacted_values(Event, {
        "session_id": run.session_id if run else None, "tier": run.tier if run else None,
        "level": level if level in ("info", "warning", "critical") else "info",
        "service": service or None, "message": message, "created_at": utcnow()})
    # Lowered, then cut: a lower case may be longer ("İ" is two characters in it).
    row["service"] = row["service"].lower()[:MAX_SERVICE_CHARS] if row["service"] else None
    row["message"] = row["message"][:2000]
    staging.stage([row])


@hookimpl
def claudeops_stats():
    since = utcnow() - timedelta(hours=24)
    return {"critical_events_24h": db.session.scalar(
        select(func.count()).select_from(Event).where(Event.level == "critical", Event.created_at >= since))}


# The memory plugin's hook: optional, so that these events still work without it.
@hookimpl(optionalhook=True)
def claudeops_memory_relevant_services(run, since):
    return services_in_trouble(run, since)


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
def claudeops_openapi_paths():
    from plugins.events.openapi import openapi_paths
    return openapi_paths()


@hookimpl
def claudeops_overview_cards():
    since = utcnow() - timedelta(hours=24)
    counts = dict(db.session.execute(select(Event.level, func.count()).where(Event.created_at >= since)
                                     .group_by(Event.level)).all())
    critical = counts.get("critical", 0)
    return [OverviewCard("Events in 24 h", str(sum(counts.values())),
                         f"{critical} critical, {counts.get('warning', 0)} warning", "events.index",
                         position=20, tone="bad" if critical else "warn" if counts.get("warning") else "neutral")]
