"""Listing rows at a cost that does not grow with the table: a total counted
no further than a cap, and the distinct values of an indexed column read
one index step per value. For the host's lists and plugins' alike."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sqlalchemy import func, literal_column, select
from sqlalchemy.sql import ColumnElement, Select

from app.extensions import db

# Past this many rows a list says "more than 10,000": counting a million
# rows on every page load (or every 5-second poll) would cost more than the page.
COUNT_CAP = 10_000


@dataclass(frozen=True)
class Total:
    count: int      # the exact count, or the cap when there are more rows
    exact: bool

    def __str__(self) -> str:
        return f"{self.count:,}" if self.exact else f"more than {self.count:,}"


def count_up_to(query: Select, cap: Optional[int] = None) -> Total:
    """How many rows ``query`` selects, reading at most ``cap`` (default
    ``COUNT_CAP``) + 1 of them."""
    cap = COUNT_CAP if cap is None else cap
    probe = query.with_only_columns(literal_column("1"), maintain_column_froms=True).order_by(None)
    found = db.session.scalar(select(func.count()).select_from(probe.limit(cap + 1).subquery()))
    return Total(min(found, cap), found <= cap)


def distinct_values(column: ColumnElement) -> list:
    """The column's distinct non-null values, in order: a recursive query that
    jumps from each value to the next through the column's index (a "loose
    index scan"), so fifty services cost fifty index lookups, not a pass over
    a million rows."""
    walk = select(func.min(column).label("value")).cte("walk", recursive=True)
    step = select(select(func.min(column)).where(column > walk.c.value).scalar_subquery()) \
        .where(walk.c.value.is_not(None))
    walk = walk.union_all(step)
    # Sorted here, not by the database, whose collation (PostgreSQL's locale) may differ from SQLite's.
    return sorted(db.session.scalars(select(walk.c.value).where(walk.c.value.is_not(None))))
