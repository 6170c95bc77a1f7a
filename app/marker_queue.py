"""Markers a plugin reads in ``claudeops_markers`` and records in
``claudeops_markers_flush``, all of a batch at once: each text block's
markers wait here, by session, with the ``PendingRecords`` the activity log
holds a place for.

Kept with the application, not the database session: a rollback of the
transaction (another plugin failed before writing anything) must not drop
markers that were never written. What a session leaves in any queue (it
failed before its last commit) is dropped by the host when the session ends,
after ``claudeops_session_finished`` (before it, for a session whose end the
database refused: the scheduler tells it later): a plugin need not clear it.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

from flask import current_app

from app.plugin_types import PendingRecords, RunInfo

# Every queue of the application, by name, so that the host can empty them all.
QUEUES = "claudeops.marker_queues"
# What the queues took during the plugin call under way in this thread
# (app/sessions/fanout.py): a call that raises is taken back whole.
_calls = threading.local()

Added = list[tuple[list, PendingRecords]]   # a session's blocks, and the entry added to them


class MarkerQueue:
    def __init__(self, name: str):
        self.name = name

    def _sessions(self) -> dict[int, list[tuple[list[Any], PendingRecords]]]:
        return current_app.extensions.setdefault(QUEUES, {}).setdefault(self.name, {})

    def add(self, run: RunInfo, markers: list[Any]) -> PendingRecords:
        """Queue one text block's markers; return this from ``claudeops_markers``."""
        records = PendingRecords()
        blocks = self._sessions().setdefault(run.session_id, [])
        blocks.append((markers, records))
        added = getattr(_calls, "added", None)
        if added is not None:
            added.append((blocks, records))
        return records

    def take(self, run: RunInfo) -> list[tuple[list[Any], PendingRecords]]:
        """Every block queued for the session since the last flush, in stream order."""
        return self._sessions().pop(run.session_id, [])


def drop_session(session_id: int) -> None:
    """Forget what every queue holds for the session: it has ended, and
    nothing will write it now."""
    for sessions in current_app.extensions.get(QUEUES, {}).values():
        sessions.pop(session_id, None)


@contextmanager
def recording() -> Iterator[Added]:
    """What every queue takes while the block runs (one plugin call), for
    ``take_back`` if the call raises."""
    _calls.added = added = []
    try:
        yield added
    finally:
        _calls.added = None


def take_back(added: Added) -> None:
    """Forget the blocks a plugin call queued before it raised: the activity
    log says that nothing it read in that text block was stored."""
    for blocks, records in added:
        blocks[:] = [block for block in blocks if block[1] is not records]
