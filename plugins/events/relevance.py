"""The services in trouble, for the memory plugin's
``claudeops_memory_relevant_services``: their memories go first in a
session's memory section.

- Every service with a warning or critical event since the recent window
  began (``since``; an index on ``created_at`` reads only the window).
- For an escalated session, every service the earlier sessions of its chain
  reported at warning or critical, however long ago: what the escalation is
  about (plugins/escalation gives the next tier the same records).
"""
from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from app.extensions import db
from app.models import Session
from app.plugin_types import RunInfo
from app.timeutil import utcnow
from plugins.events.models import Event

TROUBLE = ("warning", "critical")
# Of the two, "critical" sorts first: a service's worst level is the least.
# A chain has a session per tier; the bound only guards against a damaged one.
MAX_CHAIN = 10
MAX_SERVICES = 50


def services_in_trouble(run: RunInfo, since: datetime) -> dict[str, str]:
    found: dict[str, str] = {}
    chain = _earlier_sessions(run.parent_session_id)
    if chain:
        for service, level, tier in db.session.execute(
                select(Event.service, func.min(Event.level), func.min(Event.tier))
                .where(Event.session_id.in_(chain), Event.level.in_(TROUBLE), Event.service.is_not(None))
                .group_by(Event.service).order_by(func.min(Event.id)).limit(MAX_SERVICES)):
            found.setdefault(service, f"{level} event from tier {tier} of the escalation")
    now = utcnow()
    worst: dict[str, tuple[str, datetime]] = {}   # most recently in trouble first
    for service, level, latest in db.session.execute(
            select(Event.service, Event.level, func.max(Event.created_at))
            .where(Event.created_at >= since, Event.level.in_(TROUBLE), Event.service.is_not(None))
            .group_by(Event.service, Event.level).order_by(func.max(Event.created_at).desc())
            .limit(2 * MAX_SERVICES)):
        if service not in worst or level < worst[service][0]:
            worst[service] = (level, latest)
    for service, (level, latest) in worst.items():
        hours = int((now - latest).total_seconds() // 3600)
        found.setdefault(service, f"{level} event {hours} h ago" if hours > 0 else f"{level} event within the hour")
    return found


def _earlier_sessions(session_id) -> list[int]:
    chain: list[int] = []
    while session_id and session_id not in chain and len(chain) < MAX_CHAIN:
        chain.append(session_id)
        session_id = db.session.scalar(select(Session.parent_id).where(Session.id == session_id))
    return chain
