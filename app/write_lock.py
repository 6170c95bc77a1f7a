"""Read what is about to be changed only once no one else can change it.

A session's batch reads memories (a candidate, its confidence, its review
state), decides, and writes: a read-modify-write. On SQLite the driver
begins a transaction only at the first write, so until then every read
sees whatever another process (a dashboard worker, ``claudeops``) has
committed meanwhile, and the write then goes to a row that has changed
since it was read, or is gone: the operator's edit or rejection overwritten,
a contradiction taken twice, or an UPDATE that matches no row and fails the
plugin's whole batch. ``lock_for_writing`` takes the database's write lock
first (``BEGIN IMMEDIATE``): other writers wait for the commit (SQLite's
busy timeout), as they would for the batch's first write, and what is read
from then on stays as read until the commit.

On PostgreSQL reads are not the issue (each statement sees the latest
commit); the rows a caller will change are locked as they are read
(``SELECT ... FOR UPDATE``), which this module leaves to the caller.
"""
from __future__ import annotations

from app.extensions import db


def lock_for_writing() -> None:
    """On SQLite, the write lock for the database session's transaction,
    now, unless it holds it already (it has written). Elsewhere nothing."""
    connection = db.session.connection()
    if connection.dialect.name != "sqlite":
        return
    if not connection.connection.dbapi_connection.in_transaction:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def lock_for_request() -> None:
    """``lock_for_writing`` for a dashboard or API request that is about to
    read what it changes: its body read first, so that a slow client never
    holds the lock while a session waits for it."""
    from flask import request
    request.get_data(cache=True, parse_form_data=True)
    lock_for_writing()
