"""Rows written just before the transaction commits, one statement for
each kind of row: for what a stream writes by the thousand (event markers,
the notices the service sends about new memories and cooldowns), where an
INSERT and an ORM flush for each would cost more than the rest of the
pipeline.

The rows wait in the database session's ``info``, each with the
``BulkInsert`` that writes it. They belong to the transaction they were
staged in: when it ends without a commit (the database refused the batch,
the session was given up), they go with it. Within it, the marker fan-out
(app/sessions/fanout.py) takes back what a failing plugin staged, and only
that, as it rolls back what the plugin wrote: ``mark()`` before each call,
``undo(mark)`` after one that failed, and ``kept_through_rollback(mark)``
around a rollback of the whole transaction, which would otherwise take the
rows the calls before it staged.

Nothing here redacts: rows are staged from text already redacted or through
``app.db_redaction.redacted_values``. A plugin's own savepoint, rolled back,
does not take back rows staged within it: only the fan-out's marks do.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from sqlalchemy import event
from sqlalchemy.orm import Session

from app.bulk_insert import BulkInsert
from app.extensions import db
from app.write_lock import lock_for_writing

STAGED = "claudeops.staged_rows"
# Set once staged rows were written in the transaction, until it commits: a
# transaction that ends without its commit takes them back from the
# database, and what was worked out of them must go too.
WRITTEN = "claudeops.staged_rows.written"
# Keys of the session's ``info`` that hold something worked out from the
# staged rows (a count, say): dropped with them.
_derived: set[str] = set()


def derived(key: str) -> None:
    """``key`` (in the database session's ``info``) is worked out from the
    staged rows: forget it whenever staged rows are dropped."""
    _derived.add(key)


def stage(insert: BulkInsert, rows: list[dict]) -> None:
    _staged(db.session()).extend((insert, row) for row in rows)


def staged_for(insert: BulkInsert) -> Iterator[dict]:
    """The rows waiting for ``insert``."""
    return (row for staged_by, row in db.session.info.get(STAGED, ()) if staged_by is insert)


def mark() -> int:
    return len(db.session.info.get(STAGED, ()))


def undo(mark: int) -> None:
    """Drop what was staged since ``mark``."""
    rows = db.session.info.get(STAGED)
    if rows is not None and len(rows) > mark:
        del rows[mark:]
        _forget_derived(db.session())


@contextmanager
def kept_through_rollback(mark: int) -> Iterator[None]:
    """The rows staged before ``mark`` outlive a rollback of the whole
    transaction within the block (what was staged after it does not)."""
    session = db.session()
    kept = session.info.pop(STAGED, [])[:mark]
    try:
        yield
    finally:
        if kept:
            _staged(session)[:0] = kept
        _forget_derived(session)


def write(session: Session) -> None:
    """The staged rows, now (they are no longer staged): the rows of each
    ``BulkInsert`` in one statement, in the order they were staged."""
    rows = session.info.pop(STAGED, None)
    if not rows:
        return
    session.info[WRITTEN] = True
    by_insert: dict[BulkInsert, list[dict]] = {}
    for insert, row in rows:
        by_insert.setdefault(insert, []).append(row)
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        # Ids come from a sequence as rows are inserted, and two transactions
        # may commit in the other order: a client that follows the events
        # with ?after=<the last id it saw> would never see the lower one.
        # Held to the commit, the lock numbers the rows in commit order.
        # (SQLite takes one writer at a time: its ids are in that order.)
        lock_for_writing(session)
    for insert, table_rows in by_insert.items():
        insert(connection, table_rows)


def _staged(session: Session) -> list:
    """The session's staged rows, to add to."""
    if not session.in_transaction():
        # Nothing read or written yet: begin the transaction the rows belong
        # to, so that a rollback before its commit drops them.
        session.begin()
    return session.info.setdefault(STAGED, [])


def _forget_derived(session: Session) -> None:
    for key in _derived:
        session.info.pop(key, None)


@event.listens_for(Session, "before_commit")
def _write_before_commit(session: Session) -> None:
    write(session)


@event.listens_for(Session, "after_commit")
def _written_for_good(session: Session) -> None:
    # Also told of a savepoint's release, which the transaction may still take back.
    if not session.in_nested_transaction():
        session.info.pop(WRITTEN, None)


@event.listens_for(Session, "after_transaction_end")
def _forget_with_the_transaction(session: Session, transaction) -> None:
    """A savepoint's end keeps them; the transaction's, without a commit
    (which wrote them), drops them, and takes back those written in it
    before the commit failed (or before the batch was given up)."""
    if transaction.parent is None and not transaction.nested:
        staged = session.info.pop(STAGED, None)
        if session.info.pop(WRITTEN, None) or staged:
            _forget_derived(session)
