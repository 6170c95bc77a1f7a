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
# Warning and critical events of the window read at most: a storm of them
# says no more about which services are in trouble than its newest part.
MAX_WINDOW_ROWS = 10_000


def services_in_trouble(run: RunInfo, since: datetime) -> dict[str, str]:
    found: dict[str, str] = {}
    chain = _earlier_sessions(run.parent_session_id)
    if chain:
        for service, (level, tier) in _worst_in_chain(chain).items():
            found.setdefault(service, f"{level} event from tier {tier} of the escalation")
    now = utcnow()
    # Each service's levels and when each was last seen, the services most
    # recently in trouble first. The window's rows are read newest first and
    # grouped here: in created_at order they come from that index alone (see
    # _unindexed), and the first row of a level is its latest.
    seen: dict[str, dict[str, datetime]] = {}
    for service, level, created_at in db.session.execute(trouble_in_window(since)):
        if service not in seen and len(seen) == MAX_SERVICES:
            continue
        seen.setdefault(service, {}).setdefault(level, created_at)
    for service, levels in seen.items():
        level = min(levels)   # "critical" sorts before "warning"
        hours = int((now - levels[level]).total_seconds() // 3600)
        found.setdefault(service, f"{level} event {hours} h ago" if hours > 0 else f"{level} event within the hour")
    return found


def _worst_in_chain(chain: list[int]) -> dict[str, tuple[str, int]]:
    """Each service the chain reported in trouble, in the order it first
    did: its worst level, and the first tier that reported that level (the
    tier of a milder event would name one that saw no such thing)."""
    worst: dict[str, tuple[str, int, int]] = {}   # service: level, tier, first event in trouble
    for service, level, tier, first in db.session.execute(
            select(Event.service, Event.level, func.min(Event.tier), func.min(Event.id))
            .where(Event.session_id.in_(chain), Event.level.in_(TROUBLE), Event.service.is_not(None))
            .group_by(Event.service, Event.level)):
        known = worst.get(service)
        if known is None:
            worst[service] = (level, tier, first)
        else:
            worse = min((level, tier), known[:2])   # "critical" sorts before "warning"
            worst[service] = (*worse, min(first, known[2]))
    ordered = sorted(worst.items(), key=lambda item: item[1][2])[:MAX_SERVICES]
    return {service: (level, tier) for service, (level, tier, _) in ordered}


def trouble_in_window(since: datetime):
    """Warning and critical events with a service since ``since``, newest first."""
    return (select(Event.service, Event.level, Event.created_at)
            .where(Event.created_at >= since, _unindexed(Event.level).in_(TROUBLE),
                   _unindexed(Event.service).is_not(None))
            .order_by(Event.created_at.desc()).limit(MAX_WINDOW_ROWS))


def _unindexed(column):
    """``column`` as an expression no index answers (NULL stays NULL).
    Without statistics, SQLite would otherwise read every warning and
    critical event ever recorded, or every event with a service, through the
    level or the service index, where the created_at index reads only the
    window (tests/test_read_scaling.py checks the plan)."""
    return column.concat("")


def _earlier_sessions(session_id) -> list[int]:
    chain: list[int] = []
    while session_id and session_id not in chain and len(chain) < MAX_CHAIN:
        chain.append(session_id)
        session_id = db.session.scalar(select(Session.parent_id).where(Session.id == session_id))
    return chain
