"""The Events page (filters, 5 s polling) and ``GET /api/v1/events``."""
from __future__ import annotations

from pathlib import Path

from flask import Blueprint, request
from sqlalchemy import or_, select

from app.echoed import echoed
from app.extensions import db
from app.listing import count_up_to, distinct_values
from app.web.apiutil import MAX_ID, ApiError, int_arg, page, pagination
from app.web.filter_options import choices_state
from app.web.htmx import render_page
from app.web.ignored_args import ignore
from app.web.paging import newest_first
from plugins.events.markers import LEVELS, normalise_level
from plugins.events.models import Event

pages = Blueprint("events", __name__, template_folder=str(Path(__file__).parent / "templates"))
api = Blueprint("events_api", __name__)

PAGE_SIZE = 100
# The Service filter's choice for events about no one service ([EVENT:info]
# and the service's own notices), as the Memories page names its memories
# of no service; an event an agent tagged "general" is one of them too.
GENERAL = "general"


def _service_arg() -> str | None:
    """The ``service`` filter as the page and the API both take it: kept in
    lower case (markers.py), and without the spaces a pasted name brings."""
    return request.args.get("service", "").strip().lower() or None


def _filtered(level: str | None, service: str | None):
    query = select(Event)
    if level:
        query = query.where(Event.level == level)
    if service == GENERAL:
        query = query.where(or_(Event.service.is_(None), Event.service == GENERAL))
    elif service:
        query = query.where(Event.service == service)
    return query


@pages.get("/events")
def index():
    raw_level = request.args.get("level", "")
    level = normalise_level(raw_level) or None
    if raw_level and level is None:
        ignore(f"the level {raw_level[:40]!r}, none of {', '.join(LEVELS)}: every level is shown")
    service = _service_arg()
    query = _filtered(level, service)
    shown = newest_first(query, Event.id, PAGE_SIZE)
    services = [name for name in distinct_values(Event.service) if name != GENERAL]
    return render_page("events/index.html", "events/_rows.html", events=shown.rows, pager=shown,
                       total=count_up_to(query), levels=LEVELS, services=services, level=level,
                       service=service, general=GENERAL, **choices_state(services))


@api.get("/events")
def list_events():
    limit, offset = pagination()
    raw_level = request.args.get("level")
    level = None
    if raw_level:
        level = normalise_level(raw_level)
        if level is None:
            raise ApiError(f"level must be one of {', '.join(LEVELS)}, not {echoed(raw_level)}")
    query, just_after = _by_id(_filtered(level, _service_arg()))
    total = count_up_to(query)
    if just_after:
        # The rows just newer than ``after``, read upwards, given newest first as every page is.
        rows = db.session.scalars(query.order_by(Event.id.asc()).limit(limit).offset(offset)).all()[::-1]
    else:
        rows = db.session.scalars(query.order_by(Event.id.desc()).limit(limit).offset(offset)).all()
    return page([e.to_dict() for e in rows], total, limit, offset, key="events")


def _by_id(query):
    """``query`` narrowed by ``before`` (older than that id) or ``after``
    (newer), and whether it is ``after``. Paged by id, a client walking back
    through the events, or reading those that arrived since the last it
    saw, skips none and repeats none while new ones arrive, as paging by
    offset would (each new event moves every older one a place down)."""
    before = int_arg("before", None, 0, MAX_ID)
    after = int_arg("after", None, 0, MAX_ID)
    if before is not None and after is not None:
        raise ApiError("give before or after, not both")
    if before is not None:
        return query.where(Event.id < before), False
    if after is not None:
        return query.where(Event.id > after), True
    return query, False
