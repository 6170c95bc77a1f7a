"""The operator's review of the agent's memories: the inbox of proposed ones,
approve (as they are, or edited first) and reject. The dashboard, the API
and the CLI share these.

A proposed memory is given to no session and changes no other memory until
it is approved. Approving a rejected memory is allowed too (an operator may
reconsider); rejecting is for proposed memories only: an approved one is
deactivated or deleted instead. A rejected memory is kept for audit, never
given to a session, and the agent saying it again stores nothing (see
store.record_observation). Every change is in the memory's history.
"""
from __future__ import annotations

from typing import Optional

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.extensions import db
from app.listing import Total, count_up_to
from plugins.memory import store
from plugins.memory.models import APPROVED, PROPOSED, Memory

MAX_REASON_CHARS = 500
EDIT_FIELDS = ("observation", "category", "service", "confidence")


class ReviewStateError(Exception):
    """The memory is not in a state the action applies to (HTTP 409)."""


def proposed_query():
    """Proposed memories, newest first (an index on status and updated_at)."""
    return (select(Memory).where(Memory.status == PROPOSED)
            .order_by(Memory.updated_at.desc(), Memory.id.desc())
            .options(selectinload(Memory.track_record)))   # each row shows it: one read per page


def proposed_count() -> Total:
    return count_up_to(proposed_query())


def proposed(limit: int, offset: int = 0) -> list[Memory]:
    return db.session.scalars(proposed_query().limit(limit).offset(offset)).all()


def approve(memory: Memory, *, observation=None, category=None, service=None, confidence=None) -> Memory:
    """Approve ``memory``, after the edits given (None leaves a field as it
    is; ``service`` "" or "general" makes it a general memory). Every value
    is checked first, before the memory's state: a bad one changes nothing."""
    edits = {"observation": (store.clean_observation, observation), "category": (store.clean_category, category),
             "service": (store.clean_service, service), "confidence": (store.parse_confidence, confidence)}
    store.cleaned({name: edit for name, edit in edits.items() if edit[1] is not None})
    if memory.status == APPROVED:
        raise ReviewStateError(f"memory {memory.id} is already approved")
    store.update(memory, observation=observation, category=category, service=service, confidence=confidence)
    # A contradiction these edits undo (another service or category, other
    # words) takes no trust: mark_approved asks again of the two as they read.
    store.mark_approved(memory, store.OPERATOR)
    return memory


def reject(memory: Memory, reason=None) -> Memory:
    """Reject a proposed memory, with an optional reason kept in its history."""
    reason = clean_reason(reason)
    if memory.status != PROPOSED:
        hint = "; deactivate or delete an approved one instead" if memory.status == APPROVED else ""
        raise ReviewStateError(f"memory {memory.id} is {memory.status}: only a proposed memory can be rejected{hint}")
    store.mark_rejected(memory, reason)
    return memory


def clean_reason(raw) -> Optional[str]:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise store.MemoryInputError("reason must be text")
    reason = " ".join(raw.split())
    if "\x00" in reason:
        raise store.MemoryInputError("reason must not contain NUL characters")
    if len(reason) > MAX_REASON_CHARS:
        raise store.MemoryInputError(f"reason is {len(reason)} characters; the limit is {MAX_REASON_CHARS}")
    return reason or None
