"""Deleting old rows a batch at a time, for retention (``claudeops_prune``).

One DELETE of a year of rows would hold SQLite's write lock for as long as it
takes, past the busy timeout of a session writing its activity log meanwhile
(app/extensions.py), and fail that session. Here each transaction deletes at
most ``batch_size`` rows and is committed before the next one begins, with a
pause between them in which a waiting writer takes its turn.
"""
from __future__ import annotations

import time
from typing import Any, Iterable

from flask import g
from sqlalchemy import delete, func, inspect, select

from app.extensions import db

# Longer than SQLite's busy handler sleeps between its tries (at most 100 ms),
# so that a writer waiting for the lock gets it between two batches.
PAUSE_SECONDS = 0.15


def stop_pruning_on(event) -> None:
    """Let ``event`` (a ``threading.Event``, set when the service shuts down)
    end the deletes of this application context between two batches."""
    g.claudeops_prune_stop = event


def stopping() -> bool:
    """Is the service shutting down (``stop_pruning_on``)? Then prune no more."""
    event = g.get("claudeops_prune_stop")
    return event is not None and event.is_set()


def delete_in_batches(model: Any, criteria: Iterable[Any], batch_size: int,
                      pause: float = PAUSE_SECONDS) -> int:
    """Delete the rows of ``model`` (a mapped class with one primary key)
    matching all of ``criteria``, ``batch_size`` at a time, committing after
    each batch; returns how many were deleted. Stops early, between batches,
    when the service is shutting down: the rest are deleted next time."""
    if batch_size < 1:
        raise ValueError("batch_size must be 1 or more")
    key = inspect(model).primary_key[0]
    batch = batch_query(model, criteria, batch_size).scalar_subquery()
    deleted = 0
    while not stopping():
        # By primary key through a limited subquery: PostgreSQL has no DELETE ... LIMIT.
        count = db.session.execute(delete(key.table).where(key.in_(batch))).rowcount
        db.session.commit()
        deleted += count
        if count < batch_size:
            break
        if pause:
            time.sleep(pause)
    return deleted


def batch_query(model: Any, criteria: Iterable[Any], batch_size: int):
    """The primary keys of the next batch of rows to delete."""
    return select(inspect(model).primary_key[0]).where(*criteria).limit(batch_size)


def count_rows(model: Any, criteria: Iterable[Any]) -> int:
    return db.session.scalar(select(func.count()).select_from(model).where(*criteria))


def prune_rows(model: Any, criteria: Iterable[Any], dry_run: bool, batch_size: int) -> int:
    """What a ``claudeops_prune`` implementation does with one table's old
    rows: counts them in a dry run, deletes them (in batches) otherwise."""
    if dry_run:
        return count_rows(model, criteria)
    return delete_in_batches(model, criteria, batch_size)
