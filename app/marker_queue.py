"""Markers a plugin reads in ``claudeops_markers`` and records in
``claudeops_markers_flush``, all of a batch at once: each text block's
markers wait here, by session, with the ``PendingRecords`` the activity log
holds a place for.

Kept with the application, not the database session: a rollback of the
transaction (another plugin failed before writing anything) must not drop
markers that were never written. What a session leaves in any queue (it
failed before its last commit) is dropped by the host when the session ends,
after ``claudeops_session_finished``: a plugin need not clear it.
"""
from __future__ import annotations

from typing import Any

from flask import current_app

from app.plugin_types import PendingRecords, RunInfo

# Every queue of the application, by name, so that the host can empty them all.
QUEUES = "claudeops.marker_queues"


class MarkerQueue:
    def __init__(self, name: str):
        self.name = name

    def _sessions(self) -> dict[int, list[tuple[list[Any], PendingRecords]]]:
        return current_app.extensions.setdefault(QUEUES, {}).setdefault(self.name, {})

    def add(self, run: RunInfo, markers: list[Any]) -> PendingRecords:
        """Queue one text block's markers; return this from ``claudeops_markers``."""
        records = PendingRecords()
        self._sessions().setdefault(run.session_id, []).append((markers, records))
        return records

    def take(self, run: RunInfo) -> list[tuple[list[Any], PendingRecords]]:
        """Every block queued for the session since the last flush, in stream order."""
        return self._sessions().pop(run.session_id, [])


def drop_session(session_id: int) -> None:
    """Forget what every queue holds for the session: it has ended, and
    nothing will write it now."""
    for sessions in current_app.extensions.get(QUEUES, {}).values():
        sessions.pop(session_id, None)
