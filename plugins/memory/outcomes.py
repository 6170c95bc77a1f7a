"""Outcomes (ADR-001's graduated feedback): a session says how a memory it
was given served it, ``[OUTCOME:<level>:m<id>] <note>``, with the id its
memory section printed after the memory.

``worked``, ``partial``, ``failed`` and ``unknown`` move the memory's
confidence by their runtime settings (+0.1, +0.05, −0.2 and 0 by default;
plugins/memory/settings.py), within [0, 1]; below 0.3 it is deactivated, as
after a contradiction. ``worked`` and ``partial`` restart its staleness
clock, as a reinforcement does: it was just found to hold. Each outcome is a
history entry ("outcome": the level and the agent's note, and the session)
and a count in the memory's track record.

Only a memory the session was given (a ``MemoryInjection`` row) can be
scored, once per session: an agent cannot vote for memories it merely looked
up, nor twice for one. A session's outcomes are thereby bounded by the
memories in its prompt, and need no per-session limit of their own. Any
other outcome marker is logged and noted in the activity log, not stored.
The tier prompts ("Reporting outcomes" in prompts/*.md) teach the marker.
"""
from __future__ import annotations

import logging
import re

from sqlalchemy import select

from app.extensions import db
from app.plugin_types import MarkerRecord, RunInfo
from app.session_warnings import IN_ACTIVITY_LOG, named_kind, session_warner, warn_once
from app.web.apiutil import MAX_ID
from app.write_lock import lock_for_writing
from plugins.memory import store
from plugins.memory.context import memory_ref
from plugins.memory.markers import MalformedOutcome, OutcomeMarker, parse_outcome_markers
from plugins.memory.models import OUTCOME_LEVELS, Memory, MemoryHistory, MemoryInjection, TrackRecord
from plugins.memory.settings import outcome_delta

log = logging.getLogger(__name__)

# The memory a refusal names: its kind of refusal is the rest of the message.
_REF = re.compile(r"\bm\d+\b")

OUTCOME = "outcome"
CONFIRMING = ("worked", "partial")
# The note is the agent's account, kept in the history; the score does not
# depend on it, so a long one is shortened rather than the outcome refused.
MAX_NOTE_CHARS = 500


class OutcomeRefused(ValueError):
    """An outcome marker that changes nothing; the message says why."""


def parse(text: str, run: RunInfo) -> list[OutcomeMarker | MarkerRecord]:
    """The outcome markers of one text block, in order, to be scored
    (``score_marker``); one that cannot be read is already its record, and
    noted in the activity log."""
    if "[OUTCOME:" not in text:
        return []
    warn = session_warner(log, run.session_id, IN_ACTIVITY_LOG)
    return [MarkerRecord("memory", "outcome not stored", f"{marker.text}: {marker.why}", stored=False)
            if isinstance(marker, MalformedOutcome) else marker
            for marker in parse_outcome_markers(text, warn, run.marker_tags)]


def score_marker(marker: OutcomeMarker, run: RunInfo, settled: dict[int, str]) -> MarkerRecord:
    """Score one outcome marker; its record for the activity log. ``settled``:
    the ids scored or refused so far, and why a repeat is refused, kept by
    the caller across the markers of a batch, so that a repeat reads nothing."""
    label = f"outcome:{marker.level}:{memory_ref(marker.memory_id)}"
    try:
        if marker.memory_id in settled:
            raise OutcomeRefused(settled[marker.memory_id])
        memory, before = record_outcome(marker.memory_id, marker.level, marker.note, run)
    except OutcomeRefused as exc:
        settled[marker.memory_id] = str(exc)
        # Once per reason and id (an agent repeating a refused outcome is not
        # news), and only the first few ids of each reason: the ids are the
        # agent's to write, and one writing thousands would flood the log.
        warn_once(log, run.session_id, named_kind(f"outcome refused: {_REF.sub('m<id>', str(exc))}", str(exc)),
                  f"{label} not stored: {exc}")
        return MarkerRecord("memory", f"{label} not stored", str(exc), stored=False)
    settled[marker.memory_id] = f"this session already reported an outcome for {memory_ref(memory.id)}"
    return MarkerRecord("memory", label, f"#{memory.id} ({before:g} → {memory.confidence:g}) {marker.note}".rstrip())


def record_outcome(memory_id: int, level: str, note: str, run: RunInfo) -> tuple[Memory, float]:
    """Score one memory; returns it and its confidence before. Raises
    ``OutcomeRefused`` for a memory that does not exist, was not given to
    the session, or was scored by it already."""
    if level not in OUTCOME_LEVELS:
        raise OutcomeRefused(f"unknown outcome {level!r} (use {', '.join(OUTCOME_LEVELS)})")
    ref = memory_ref(memory_id)
    no_memory = f"there is no memory {ref} (deleted, or never recorded)"
    # A refusal is read without the write lock, which a runaway agent's
    # thousands of them would otherwise hold from the dashboard and the API.
    if not 0 < memory_id <= MAX_ID or db.session.get(Memory, memory_id) is None:
        raise OutcomeRefused(no_memory)
    if not _given(memory_id, run.session_id):
        raise OutcomeRefused(f"memory {ref} was not given to this session; only memories in its "
                             "Operational Memory can be scored")
    if _scored(memory_id, run.session_id):
        raise OutcomeRefused(f"this session already reported an outcome for {ref}")
    # What is read from here stays as read until the commit: an operator's
    # change meanwhile waits for it (app/write_lock.py).
    lock_for_writing()
    memory = db.session.get(Memory, memory_id, populate_existing=True)
    if memory is None:   # deleted since
        raise OutcomeRefused(no_memory)
    if len(note) > MAX_NOTE_CHARS:
        note = note[:MAX_NOTE_CHARS - 1].rstrip() + "…"
    before = store.score(memory, outcome_delta(level), f"{level}: {note}" if note else level,
                         run=run, confirms=level in CONFIRMING)
    _count(memory, level)
    return memory, before


def given_ids(session_id: int) -> set[int]:
    """The memories the session was given: the only ones it may score."""
    return set(db.session.scalars(select(MemoryInjection.memory_id).where(MemoryInjection.session_id == session_id)))


def _given(memory_id: int, session_id: int) -> bool:
    return db.session.scalar(select(MemoryInjection.id).where(
        MemoryInjection.session_id == session_id, MemoryInjection.memory_id == memory_id).limit(1)) is not None


def _scored(memory_id: int, session_id: int) -> bool:
    return db.session.scalar(select(MemoryHistory.id).where(
        MemoryHistory.memory_id == memory_id, MemoryHistory.session_id == session_id,
        MemoryHistory.action == OUTCOME).limit(1)) is not None


def _count(memory: Memory, level: str) -> None:
    if memory.track_record is None:
        memory.track_record = TrackRecord(**{name: 0 for name in OUTCOME_LEVELS})
    setattr(memory.track_record, level, getattr(memory.track_record, level) + 1)
