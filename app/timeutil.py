"""The one timestamp format: UTC, stored naive in the database, shown as
ISO 8601 with a ``Z`` (``2026-11-22T02:20:53Z``) in the API and the dashboard."""
from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy.types import DateTime, TypeDecorator


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def isoformat(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class UTCDateTime(TypeDecorator):
    """A DateTime column that only ever holds UTC.

    Values are stored without a zone (SQLite has none) and come back aware, so
    arithmetic and comparisons never mix naive and aware datetimes.
    """

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use app.timeutil.utcnow()")
        return value.astimezone(timezone.utc).replace(tzinfo=None)

    @staticmethod
    def sqlite_text(value: datetime | None) -> str | None:
        """What SQLite stores for ``value`` ("2026-11-22 02:20:53.000000"),
        in one step: the same text as this type's bind processing followed
        by the dialect's, at a fraction of the cost, for the stream's bulk
        inserts (app/bulk_insert.py). tests/test_database.py holds the two
        to the same text."""
        if value is None:
            return None
        if value.tzinfo is timezone.utc:   # utcnow()'s: its text, less the "+00:00"
            return value.isoformat(" ", "microseconds")[:-6]
        if value.tzinfo is None:
            raise ValueError("naive datetime given; use app.timeutil.utcnow()")
        return value.astimezone(timezone.utc).replace(tzinfo=None).isoformat(" ", "microseconds")

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc)
