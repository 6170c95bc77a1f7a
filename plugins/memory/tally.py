"""What one session has done to the memories so far: how many it created,
which it or an earlier session of its escalation chain created or
reinforced, which of them it or that chain contradicted, and how many
proposals it confirmed. They are checked for every
memory marker of a stream; they are read from the tables once per session
and then kept up to date as the session writes, in the database session's
``info``.

A rollback (the database refused a batch, a plugin failed, the session was
given up) may take rows they count: they are read again on the next use.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from app.extensions import db
from app.models import Session as SessionRow
from plugins.memory.models import Memory, MemoryHistory

TALLIES = "claudeops.memory.session_tallies"
# History actions by which a session vouches for a memory: once per memory at most.
VOUCHED = ("created", "proposed", "reinforced")


@dataclass
class Tally:
    created: int                                   # new memories, contradicting ones included
    # Memories it, or a session before it in its escalation chain, created or
    # reinforced: an escalated session is shown what the tiers before it
    # recorded, so saying it again is no more a confirmation than its own repeat.
    vouched: set[int] = field(default_factory=set)
    confirmed: int = 0                             # proposals it confirmed (each approved by it)
    # Memories it, or a session before it in its chain, took trust from by
    # contradicting them: an agent saying the opposite again, in other
    # words, is no more a second contradiction than a repeat is a confirmation.
    contradicted: set[int] = field(default_factory=set)


def tally(session_id: int) -> Tally:
    tallies = db.session.info.setdefault(TALLIES, {})
    if session_id not in tallies:
        created = db.session.scalar(select(func.count()).select_from(Memory).where(Memory.session_id == session_id))
        chain = escalation_chain(session_id)
        vouched = set(db.session.scalars(vouched_query(chain)))
        confirmed = db.session.scalar(select(func.count()).select_from(MemoryHistory).where(
            MemoryHistory.session_id == session_id, MemoryHistory.action == "approved"))
        contradicted = set(db.session.scalars(select(MemoryHistory.memory_id).distinct().where(
            MemoryHistory.session_id.in_(chain), MemoryHistory.action == "contradicted")))
        tallies[session_id] = Tally(created, vouched, confirmed, contradicted)
    return tallies[session_id]


def escalation_chain(session_id: int) -> list[int]:
    """The session, then each one before it in its escalation chain, back
    to the first (tiers only go up, so a chain is a few sessions long)."""
    chain = [session_id]
    for _ in range(10):
        parent = db.session.scalar(select(SessionRow.parent_id).where(SessionRow.id == chain[-1]))
        if parent is None:
            break
        chain.append(parent)
    return chain


def vouched_query(session_ids: list[int]):
    """The memories the sessions created or reinforced (an index on session and action)."""
    return select(MemoryHistory.memory_id).distinct().where(
        MemoryHistory.session_id.in_(session_ids), MemoryHistory.action.in_(VOUCHED))


def note_created(session_id: int, memory_id: int) -> None:
    known = db.session.info.get(TALLIES, {}).get(session_id)
    if known is not None:
        known.created += 1
        known.vouched.add(memory_id)


def note_confirmed(session_id: int) -> None:
    known = db.session.info.get(TALLIES, {}).get(session_id)
    if known is not None:
        known.confirmed += 1


def note_contradicted(session_id: int, memory_id: int) -> None:
    known = db.session.info.get(TALLIES, {}).get(session_id)
    if known is not None:
        known.contradicted.add(memory_id)


def note_reinforced(session_id: int, memory_id: int) -> None:
    known = db.session.info.get(TALLIES, {}).get(session_id)
    if known is not None:
        known.vouched.add(memory_id)


@event.listens_for(Session, "after_soft_rollback")
def _forget_on_rollback(session: Session, previous_transaction) -> None:
    """A rollback, to a savepoint or of the whole transaction, may take rows
    the tallies count: read them again on the next use."""
    session.info.pop(TALLIES, None)
