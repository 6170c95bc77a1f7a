"""Read what is about to be changed only once no one else can change it.

A session's batch reads memories (a candidate, its confidence, its review
state), decides, and writes: a read-modify-write, as are an operator's
edit, approval or rejection, decay and an import. Until a transaction
holds a lock, every read sees whatever another process (a dashboard
worker, ``claudeops``, the scheduler) has committed meanwhile, and the
write then goes to a row that has changed since it was read, or is gone:
the operator's edit or rejection overwritten, a contradiction taken twice,
or an UPDATE that matches no row and fails the plugin's whole batch.

``lock_for_writing`` takes a lock first, which each of them holds to its
commit; whoever comes second waits for that commit (SQLite's busy timeout,
PostgreSQL's lock wait) and reads what it left.

- SQLite: the database's write lock (``BEGIN IMMEDIATE``). The driver
  begins a transaction only at the first write; until then each read sees
  the latest commit.
- PostgreSQL: one transaction-level advisory lock, taken by every caller
  of this function. At the default isolation (read committed) each
  statement sees the latest commit, so what is read once the lock is held
  stays as read. Writers that do not call it are not held back, as they
  are not by a row lock they never ask for.
"""
from __future__ import annotations

from typing import Optional

from flask import request
from sqlalchemy import text
from sqlalchemy.orm import Session

from app.extensions import db

# Any fixed number: the advisory lock's name, in the one key space all
# sessions of the database share. (A plugin taking advisory locks of its
# own keeps to other numbers.)
ADVISORY_KEY = 0x434C4F50   # "CLOP"


def lock_for_writing(session: Optional[Session] = None) -> None:
    """The lock, for the database session's transaction (``session``, or
    the application's), now; held until it commits or rolls back. Taking it
    again in the same transaction is free."""
    connection = (session or db.session).connection()
    dialect = connection.dialect.name
    if dialect == "sqlite":
        if not connection.connection.dbapi_connection.in_transaction:   # it has written: it holds the lock
            connection.exec_driver_sql("BEGIN IMMEDIATE")
    elif dialect == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_KEY})


def lock_for_request() -> None:
    """``lock_for_writing`` for a dashboard or API request that is about to
    read what it changes: its body read first, so that a slow client never
    holds the lock while a session waits for it."""
    request.get_data(cache=True, parse_form_data=True)
    lock_for_writing()
