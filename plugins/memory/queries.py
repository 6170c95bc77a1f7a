"""Listing memories with the filters the page, the API and the CLI share."""
from __future__ import annotations

from typing import Optional

from sqlalchemy import func, or_, select

from app.extensions import db
from plugins.memory.models import CATEGORIES, Memory
from plugins.memory.store import GENERAL, MemoryInputError

STATUSES = ("active", "inactive")


def memory_query(service: Optional[str] = None, category: Optional[str] = None,
                 active: Optional[bool] = None, q: Optional[str] = None):
    """``service`` "general" selects general memories; ``q`` matches words in
    the observation or the service, case-insensitively."""
    query = select(Memory)
    if service:
        query = query.where(Memory.service.is_(None) if service == GENERAL else Memory.service == service)
    if category:
        if category not in CATEGORIES:
            raise MemoryInputError(f"category must be one of {', '.join(CATEGORIES)}, not {category!r}")
        query = query.where(Memory.category == category)
    if active is not None:
        query = query.where(Memory.active.is_(active))
    for word in (q or "").split()[:10]:
        pattern = "%" + _escape_like(word) + "%"
        query = query.where(or_(Memory.observation.ilike(pattern, escape="\\"),
                                Memory.service.ilike(pattern, escape="\\")))
    return query


def _escape_like(word: str) -> str:
    """So that % and _ typed by the operator match themselves."""
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def newest_first(query):
    return query.order_by(Memory.updated_at.desc(), Memory.id.desc())


def count(query) -> int:
    return db.session.scalar(select(func.count()).select_from(query.subquery()))


def services() -> list[str]:
    # Sorted here, not by the database, whose collation (PostgreSQL's locale) may differ from SQLite's.
    return sorted(db.session.scalars(select(Memory.service).distinct().where(Memory.service.is_not(None))))
