"""What a marker does to the incidents table, and what the agent is told.

At most one incident per service is open at a time: a second opening marker
for the same service updates the open incident (its severity and summary are
the latest word) instead of opening a duplicate. A session opens at most so
many incidents: an agent that repeats itself, over service after service,
must not fill the table.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import case, func, select

from app.extensions import db
from app.plugin_types import RunInfo
from app.timeutil import isoformat, utcnow
from claudeops_incidents.markers import SEVERITIES, IncidentMarker
from claudeops_incidents.models import OPEN, RESOLVED, Incident

log = logging.getLogger(__name__)

# Most severe first, wherever open incidents are listed.
SEVERITY_ORDER = case({"critical": 0, "major": 1, "minor": 2}, value=Incident.severity, else_=3)

MAX_PROMPT_INCIDENTS = 20
MAX_PROMPT_SUMMARY_CHARS = 300


# What an opening marker beyond the session's limit comes to.
REFUSED = "refused"


@dataclass(frozen=True)
class Outcome:
    incident: Incident | None   # None when refused
    action: str        # "opened", "updated", "resolved" or REFUSED


def open_incident(service: str) -> Incident | None:
    return db.session.scalar(select(Incident).where(Incident.status == OPEN, Incident.service == service)
                             .order_by(Incident.id.desc()).limit(1))


def open_incidents(limit: int | None = None) -> list[Incident]:
    query = select(Incident).where(Incident.status == OPEN).order_by(SEVERITY_ORDER, Incident.opened_at, Incident.id)
    return list(db.session.scalars(query.limit(limit) if limit else query))


def open_counts() -> dict[str, int]:
    """Open incidents by severity."""
    return dict(db.session.execute(select(Incident.severity, func.count()).where(Incident.status == OPEN)
                                   .group_by(Incident.severity)).all())


def opened_in_session(session_id: int) -> int:
    return db.session.scalar(select(func.count()).select_from(Incident)
                             .where(Incident.opened_session_id == session_id))


def apply_marker(marker: IncidentMarker, run: RunInfo, max_opened: int) -> Outcome | None:
    """Open, update or resolve the service's incident. The host commits it
    with the stream's next batch, or takes it back if the hook raises. A
    marker that would open one more than ``max_opened`` in the session is
    ``REFUSED``; updating and resolving are never refused."""
    now = utcnow()
    current = open_incident(marker.service)
    if marker.resolves:
        if current is None:
            log.warning("session %s resolved an incident of %r, but none is open", run.session_id, marker.service)
            return None
        current.status, current.resolved_at, current.updated_at = RESOLVED, now, now
        current.resolved_session_id = run.session_id
        current.resolution = marker.summary or None
        return Outcome(current, "resolved")
    if current is not None:
        current.severity, current.summary, current.updated_at = marker.action, marker.summary, now
        current.updates += 1
        return Outcome(current, "updated")
    if opened_in_session(run.session_id) >= max_opened:
        return Outcome(None, REFUSED)
    incident = Incident(service=marker.service, severity=marker.action, status=OPEN, summary=marker.summary,
                        updates=0, tier=run.tier, opened_at=now, updated_at=now, opened_session_id=run.session_id)
    db.session.add(incident)
    db.session.flush()  # the id, for the activity log's badge
    return Outcome(incident, "opened")


def prompt_text() -> str:
    """The system prompt section: the marker format, then what is open now."""
    lines = [
        "## Incidents",
        "",
        "When a service is failing or degraded in a way an operator must follow, open an incident with a",
        "marker in your own text (never inside a tool command), on its own line:",
        "",
        "    [INCIDENT:<severity>:<service>] <summary>",
        "",
        f"`<severity>` is one of {', '.join(SEVERITIES)}. Writing the marker again for a service whose",
        "incident is open updates that incident (severity and summary) instead of opening another.",
        "When the service has recovered, close its incident:",
        "",
        "    [INCIDENT:resolved:<service>] <what fixed it, or how you know it recovered>",
        "",
    ]
    incidents = open_incidents()
    if not incidents:
        lines.append("No incident is open.")
        return "\n".join(lines)
    lines.append(f"Open incidents ({len(incidents)}); check each, and resolve the ones that have recovered:")
    lines.append("")
    for incident in incidents[:MAX_PROMPT_INCIDENTS]:
        summary = incident.summary
        if len(summary) > MAX_PROMPT_SUMMARY_CHARS:
            summary = summary[:MAX_PROMPT_SUMMARY_CHARS - 1] + "…"
        lines.append(f"- [{incident.severity}] {incident.service}: {summary} "
                     f"(open since {isoformat(incident.opened_at)}, incident #{incident.id})")
    if len(incidents) > MAX_PROMPT_INCIDENTS:
        lines.append(f"- … and {len(incidents) - MAX_PROMPT_INCIDENTS} more (see the Incidents page)")
    return "\n".join(lines)
