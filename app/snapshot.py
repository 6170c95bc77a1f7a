"""Reads that all see the database as it was at the first of them.

An export reads the memories, their history and their track records in
several statements, the longest a batch at a time: an outcome recorded
between two of them would give a track record that disagrees with the
history beside it.

- SQLite: one read transaction (a deferred BEGIN), whose snapshot holds
  until it ends; writers go on meanwhile (WAL).
- PostgreSQL: a REPEATABLE READ transaction, begun here. What the request
  read before (its login, say) is let go: only reads may come before.
"""
from __future__ import annotations

from app.extensions import db


def one_snapshot() -> None:
    """From here to the end of the database session's transaction."""
    connection = db.session.connection()
    dialect = connection.dialect.name
    if dialect == "sqlite":
        if not connection.connection.dbapi_connection.in_transaction:
            connection.exec_driver_sql("BEGIN")
    elif dialect == "postgresql":
        db.session.rollback()   # a snapshot's isolation is set as its transaction begins
        db.session.connection().exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
