"""Listing memories with the filters the page, the API and the CLI share."""
from __future__ import annotations

from typing import Optional

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.listing import Total, count_up_to, distinct_values
from plugins.memory import search
from plugins.memory.models import CATEGORIES, Memory
from plugins.memory.store import GENERAL, MemoryInputError

STATUSES = ("active", "inactive")


def memory_query(service: Optional[str] = None, category: Optional[str] = None,
                 active: Optional[bool] = None, q: Optional[str] = None):
    """``service`` "general" selects general memories; ``q`` is a full-text
    search (see plugins/memory/search.py): matches come best first, and an
    ``order_by`` added later only breaks ties."""
    query = select(Memory)
    if service:
        query = query.where(Memory.service.is_(None) if service == GENERAL else Memory.service == service)
    if category:
        if category not in CATEGORIES:
            raise MemoryInputError(f"category must be one of {', '.join(CATEGORIES)}, not {category!r}")
        query = query.where(Memory.category == category)
    if active is not None:
        query = query.where(Memory.active.is_(active))
    return search.apply(query, q) if q else query


def newest_first(query):
    """Newest first, with each memory's track record (one more query for the whole page)."""
    return query.order_by(Memory.updated_at.desc(), Memory.id.desc()).options(selectinload(Memory.track_record))


def best_first(query):
    """Most trusted first: the order the prompt's memory section uses."""
    return query.order_by(Memory.confidence.desc(), Memory.updated_at.desc(), Memory.id.desc())


def count(query) -> Total:
    """Exact up to ``app.listing.COUNT_CAP``, "more than" beyond."""
    return count_up_to(query)


def services() -> list[str]:
    return distinct_values(Memory.service)
