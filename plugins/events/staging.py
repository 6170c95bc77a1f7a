"""Event rows from markers and from the service's notices, written in one
statement when the session commits (app/staged_rows.py).

A busy stream can hold thousands of event markers, and the notices of its
new memories and cooldown reports: an INSERT (and an ORM flush) for each
would cost more than everything else the pipeline does. The stream handler
commits at least every half second, so the Events page stays live. A plugin
that fails takes back only the rows it staged itself (the marker fan-out
sees to it); the transaction ending without a commit takes them all, like
every other row of the batch.
"""
from __future__ import annotations

from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from app import staged_rows
from app.bulk_insert import BulkInsert
from app.extensions import db
from plugins.events.models import Event

COUNTED = "claudeops.events.per_session"
staged_rows.derived(COUNTED)
_insert_events = BulkInsert(Event.__table__, ("session_id", "tier", "level", "service", "message", "created_at"))


def stage(rows: list[dict]) -> None:
    staged_rows.stage(_insert_events, rows)
    counts = db.session.info.get(COUNTED, {})
    for row in rows:
        if row["session_id"] in counts:
            counts[row["session_id"]] += 1


def session_count(session_id: int) -> int:
    """Events the session has, stored or staged: read from the table once a
    transaction (a batch of the stream), then counted as they are staged
    (the per-session limit is checked for every marker, and a COUNT each
    time would cost as much as the rows themselves). Read again for the
    next batch: the notices another process writes for the session (the
    cooldown hook's denials) count too."""
    counts = db.session.info.setdefault(COUNTED, {})
    if session_id not in counts:
        staged = sum(1 for row in staged_rows.staged_for(_insert_events) if row["session_id"] == session_id)
        counts[session_id] = staged + db.session.scalar(
            select(func.count()).select_from(Event).where(Event.session_id == session_id))
    return counts[session_id]


def write_staged(session: Session) -> None:
    """The staged rows, now (they are no longer staged)."""
    staged_rows.write(session)


@event.listens_for(Session, "after_transaction_end")
def _count_again_next_transaction(session: Session, transaction) -> None:
    if transaction.parent is None and not transaction.nested:
        session.info.pop(COUNTED, None)
