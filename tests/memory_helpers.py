"""Shared helpers for the memory tests."""
from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import select, text

from app.extensions import db
from app.models import Session
from app.plugin_types import RunInfo
from app.sessions import control
from app.sessions.activity import StreamHandler
from app.sessions.manager import run_info
from app.timeutil import utcnow
from plugins.memory import store
from plugins.memory.models import Memory, MemoryHistory
from tests import streamlines as sl


def new_run(tier: int = 1, escalated_from: RunInfo | None = None) -> RunInfo:
    """A session row, as a running session would have, and its RunInfo;
    with ``escalated_from``, the next tier's session of that one's chain."""
    if escalated_from is not None:
        tier = escalated_from.tier + 1
    session = Session(tier=tier, trigger="escalation" if escalated_from else "api", status="running", model="haiku",
                      created_at=utcnow(), started_at=utcnow(),
                      parent_id=escalated_from.session_id if escalated_from else None)
    db.session.add(session)
    db.session.commit()
    return run_info(session)


def stream_handler(run: RunInfo | None = None) -> StreamHandler:
    """The stream handler of ``run``'s session, or of a new one, as the runner makes it."""
    session = db.session.get(Session, run.session_id) if run else \
        control.claim(control.enqueue(tier=1, trigger="api").id)
    return StreamHandler(session, run_info(session))


def text_line(text: str) -> bytes:
    """A stream line holding one text block of the agent's."""
    return json.dumps(sl.text(text)).encode()


def remember(text: str, run: RunInfo) -> store.Recorded:
    """Feed one assistant text block through the memory plugin's marker hook path."""
    from plugins.memory.markers import parse_memory_markers
    (marker,) = parse_memory_markers(text)
    recorded = store.record_observation(marker.category, marker.service, marker.observation, run)
    db.session.commit()
    return recorded


def add_memory(observation: str, category: str = "timing", service: str | None = "jellyfin",
               confidence: float = 0.7, active: bool = True, age_days: float = 0, session_id=None,
               pinned: bool = False) -> Memory:
    when = utcnow() - timedelta(days=age_days)
    memory = Memory(service=service, category=category, observation=observation, confidence=confidence,
                    active=active, created_at=when, updated_at=when, session_id=session_id, tier=1,
                    pinned=pinned)
    db.session.add(memory)
    db.session.commit()
    return memory


def all_memories() -> list[Memory]:
    db.session.expire_all()
    return db.session.scalars(select(Memory).order_by(Memory.id)).all()


def history(memory_id: int) -> list[tuple]:
    return [(h.action, h.confidence_before, h.confidence_after, h.actor, h.session_id)
            for h in db.session.scalars(select(MemoryHistory).where(MemoryHistory.memory_id == memory_id)
                                        .order_by(MemoryHistory.id))]


def insert_row(observation: str) -> None:
    """A memory written by SQL alone, as before the newest revisions (no
    status, no search index entry of the ORM's): for migration tests."""
    db.session.execute(text(
        "INSERT INTO memories (service, category, observation, confidence, active, created_at, updated_at, tier, "
        "decay_due_at) VALUES ('web', 'timing', :observation, 0.7, true, '2026-11-01 10:00:00', "
        "'2026-11-01 10:00:00', 1, '2026-12-01 10:00:00')"), {"observation": observation})
    db.session.commit()
