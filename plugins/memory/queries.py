"""Listing memories with the filters the page, the API and the CLI share."""
from __future__ import annotations

from typing import Optional

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.echoed import echoed
from app.listing import Total, count_up_to, distinct_values
from plugins.memory import search
from plugins.memory.models import APPROVED, CATEGORIES, PROPOSED, REJECTED, REVIEW_STATES, Memory
from plugins.memory.store import GENERAL, MemoryInputError

# The page's and the CLI's status filter: active and inactive are among the
# approved memories; proposed and rejected are review states.
STATUSES = ("active", "inactive", PROPOSED, REJECTED)
STATUS_FILTERS = {"active": (True, APPROVED), "inactive": (False, APPROVED),
                  PROPOSED: (None, PROPOSED), REJECTED: (None, REJECTED)}


def status_filter(status: Optional[str]) -> dict:
    """``memory_query``'s ``active`` and ``review`` for a status of STATUSES (or none)."""
    active, review = STATUS_FILTERS.get(status or "", (None, None))
    return {"active": active, "review": review}


def memory_query(service: Optional[str] = None, category: Optional[str] = None,
                 active: Optional[bool] = None, q: Optional[str] = None, review: Optional[str] = None):
    """``service`` "general" selects general memories, in any case; ``review`` one of
    approved, proposed or rejected; ``q`` is a full-text search (see
    plugins/memory/search.py): matches come best first, and an ``order_by``
    added later only breaks ties."""
    query = select(Memory)
    # Kept in lower case and without spaces around (store.clean_service); the events' filter reads it so too.
    service = (service or "").strip().lower()
    if service:
        query = query.where(Memory.service.is_(None) if service == GENERAL else Memory.service == service)
    if category:
        query = query.where(Memory.category == _one_of(category, CATEGORIES, "category"))
    if active is not None:
        query = query.where(Memory.active.is_(active))
    if review:
        query = query.where(Memory.status == _one_of(review, REVIEW_STATES, "status"))
    return search.apply(query, q) if q else query


def _one_of(raw: str, choices, name: str) -> str:
    """``raw`` as one of ``choices``, in any case, as the events' level and
    the cooldowns' action and outcome are read; MemoryInputError if none."""
    value = raw.strip().lower()
    if value not in choices:
        raise MemoryInputError(f"{name} must be one of {', '.join(choices)}, not {echoed(raw)}")
    return value


def newest_first(query):
    """Newest first, with each memory's track record (one more query for the whole page)."""
    return query.order_by(Memory.updated_at.desc(), Memory.id.desc()).options(selectinload(Memory.track_record))


def best_first(query):
    """Most trusted first (the order the prompt's memory section uses), with
    each memory's track record (one more query for the whole page)."""
    return (query.order_by(Memory.confidence.desc(), Memory.updated_at.desc(), Memory.id.desc())
            .options(selectinload(Memory.track_record)))


def count(query) -> Total:
    """Exact up to ``app.listing.COUNT_CAP``, "more than" beyond."""
    return count_up_to(query)


def services() -> list[str]:
    return distinct_values(Memory.service)
