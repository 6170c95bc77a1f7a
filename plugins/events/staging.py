"""Event rows from markers, written in one statement when the session commits.

A busy stream can hold thousands of event markers: an INSERT (and an ORM
flush) for each would cost more than everything else the pipeline does. The
rows wait in the database session's ``info`` and go in with one executemany
just before it commits (the stream handler commits at least every half
second, so the Events page stays live). A rollback leaves them waiting: they
come from marker calls that succeeded, and another plugin's failure must
not cost them.
"""
from __future__ import annotations

from sqlalchemy import event, insert
from sqlalchemy.orm import Session

from app.extensions import db
from plugins.events.models import Event

STAGED = "claudeops.events.staged"


def stage(rows: list[dict]) -> None:
    db.session.info.setdefault(STAGED, []).extend(rows)


@event.listens_for(Session, "before_commit")
def _write_staged(session: Session) -> None:
    rows = session.info.pop(STAGED, None)
    if rows:
        session.execute(insert(Event.__table__), rows)
