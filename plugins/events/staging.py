"""Event rows from markers, written in one statement when the session commits.

A busy stream can hold thousands of event markers: an INSERT (and an ORM
flush) for each would cost more than everything else the pipeline does. The
rows wait in the database session's ``info`` and go in with one executemany
just before it commits (the stream handler commits at least every half
second, so the Events page stays live). Rolling back to a savepoint (another
plugin failed) leaves them waiting; the transaction ending without a commit
takes them with it, like every other row of the batch.
"""
from __future__ import annotations

from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from app.bulk_insert import BulkInsert
from app.extensions import db
from plugins.events.models import Event

STAGED = "claudeops.events.staged"
COUNTED = "claudeops.events.per_session"
_insert_events = BulkInsert(Event.__table__, ("session_id", "tier", "level", "service", "message", "created_at"))


def stage(rows: list[dict]) -> None:
    db.session.info.setdefault(STAGED, []).extend(rows)
    counts = db.session.info.get(COUNTED, {})
    for row in rows:
        if row["session_id"] in counts:
            counts[row["session_id"]] += 1


def note_stored(session_id: int) -> None:
    """An event of the session written another way (a notice) counts too."""
    counts = db.session.info.get(COUNTED, {})
    if session_id in counts:
        counts[session_id] += 1


def session_count(session_id: int) -> int:
    """Events the session has, stored or staged: read from the table once per
    session, then counted as they are staged (the per-session limit is
    checked for every marker, and a COUNT each time would cost as much as the
    rows themselves)."""
    counts = db.session.info.setdefault(COUNTED, {})
    if session_id not in counts:
        staged = sum(1 for row in db.session.info.get(STAGED, ()) if row["session_id"] == session_id)
        counts[session_id] = staged + db.session.scalar(
            select(func.count()).select_from(Event).where(Event.session_id == session_id))
    return counts[session_id]


def write_staged(session: Session) -> None:
    """The staged rows, now (they are no longer staged)."""
    rows = session.info.pop(STAGED, None)
    if rows:
        _insert_events(session.connection(), rows)


@event.listens_for(Session, "before_commit")
def _write_staged(session: Session) -> None:
    write_staged(session)


@event.listens_for(Session, "after_transaction_end")
def _forget_with_the_transaction(session: Session, transaction) -> None:
    """Staged rows belong to the transaction they were staged in: when it ends
    without a commit (the database refused the batch, the session was given
    up), they go with the rest of it. A savepoint's end keeps them."""
    if transaction.parent is None and not transaction.nested:
        if session.info.pop(STAGED, None):
            session.info.pop(COUNTED, None)   # the counts included them
