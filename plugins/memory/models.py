"""The memory plugin's tables: memories, their history, which memories each
session was given, and each memory's track record of reported outcomes."""
from __future__ import annotations

import re
from datetime import timedelta
from typing import Optional

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String, Text, event, false, text, true
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import db
from app.timeutil import UTCDateTime, isoformat, utcnow

CATEGORIES = ("timing", "dependency", "behavior", "remediation", "maintenance")
# A memory's service: NULL, "general" in markers, forms and exports; a name
# of at most this many letters, digits, "_" and "-" (store.clean_service).
GENERAL = "general"
MAX_SERVICE_CHARS = 100
# What a memory's service may not hold, run together.
NOT_IN_A_SERVICE = re.compile(r"[^A-Za-z0-9_-]+")
# What a session may report of a memory it was given: [OUTCOME:<level>:m<id>].
OUTCOME_LEVELS = ("worked", "partial", "failed", "unknown")
# Review states: only an approved memory is given to sessions. With review
# on (CLAUDEOPS_MEMORY_REVIEW) the agent's new memories start proposed.
APPROVED, PROPOSED, REJECTED = "approved", "proposed", "rejected"
REVIEW_STATES = (APPROVED, PROPOSED, REJECTED)
# What a history row says was done to its memory: all the service writes.
HISTORY_ACTIONS = ("created", "reinforced", "contradicted", "decayed", "edited", "pinned", "unpinned",
                   "deactivated", "reactivated", "deleted", "imported", "outcome", "proposed", "approved",
                   "rejected", "repeated")
ACTIVE_THRESHOLD = 0.3
DEFAULT_CONFIDENCE = 0.7
# Memories not reinforced or edited for this long start to decay, a week at a time.
DECAY_GRACE_PERIOD = timedelta(days=30)


def memory_spelling(name: str) -> Optional[str]:
    """How a memory names a service that events and cooldowns name with
    characters a memory's may not hold (a unit, getty@tty1; a host,
    db.lan): each run of them as "-", in lower case. None when nothing is
    left, it is too long, or it would be the general memories' name."""
    spelt = NOT_IN_A_SERVICE.sub("-", name).strip("-").lower()
    return spelt if spelt and len(spelt) <= MAX_SERVICE_CHARS and spelt != GENERAL else None


class Memory(db.Model):
    __tablename__ = "memories"
    __table_args__ = (
        # SPEC-0015's indexes.
        Index("idx_memories_service", "service", "active"),
        Index("idx_memories_confidence", "confidence", "active"),
        Index("idx_memories_category", "category"),
        # Reads that must not grow with the table. The newest first (the
        # Memories page and the API), unfiltered or by service, status,
        # category, or service and either, without a sort:
        Index("ix_memories_updated_at_id", "updated_at", "id"),
        Index("ix_memories_service_updated_at_id", "service", "updated_at", "id"),
        Index("ix_memories_active_updated_at_id", "active", "updated_at", "id"),
        Index("ix_memories_service_active_updated_at_id", "service", "active", "updated_at", "id"),
        Index("ix_memories_category_updated_at_id", "category", "updated_at", "id"),
        Index("ix_memories_service_category_updated_at_id", "service", "category", "updated_at", "id"),
        # The most trusted approved ones first (each session's context), the
        # review inbox (and the page's status filter), and the memories whose
        # next week of decay has fallen due (each session start).
        Index("ix_memories_status_active_confidence_updated_at", "status", "active", "confidence", "updated_at"),
        Index("ix_memories_status_updated_at_id", "status", "updated_at", "id"),
        Index("ix_memories_active_pinned_decay_due_at", "active", "pinned", "decay_due_at"),
        # What a new observation is matched against (plugins/memory/candidates.py):
        # the live memories of its service and category, and the rejected ones.
        Index("ix_memories_service_category_active_confidence", "service", "category", "active", "confidence"),
        Index("ix_memories_service_category_status_confidence", "service", "category", "status", "confidence"),
        # Ids are never reused, so the history of a deleted memory can never
        # be mistaken for a newer one's.
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    service: Mapped[str | None] = mapped_column(Text)          # NULL: a general memory
    category: Mapped[str] = mapped_column(Text, nullable=False)
    observation: Mapped[str] = mapped_column(Text, nullable=False)
    confidence: Mapped[float] = mapped_column(Float, nullable=False, default=DEFAULT_CONFIDENCE,
                                              server_default=text("0.7"))
    active: Mapped[bool] = mapped_column(Boolean, nullable=False, default=True, server_default=true())
    created_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    # Refreshed when the memory is reinforced or edited by the operator, never
    # by decay: staleness is measured from here.
    updated_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    tier: Mapped[int] = mapped_column(Integer, nullable=False, default=1, server_default=text("1"))
    pinned: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False, server_default=false())
    # Weeks of staleness already taken off since updated_at; makes decay idempotent.
    decayed_weeks: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default=text("0"))
    # When the next week of decay falls due (kept by decay_schedule below), so
    # that a session start finds the few memories to decay without reading the rest.
    decay_due_at = mapped_column(UTCDateTime, nullable=False)
    # The older memory this one contradicted.
    contradicts_id: Mapped[int | None] = mapped_column(ForeignKey("memories.id", ondelete="SET NULL"), index=True)
    # Loaded when asked for: lists that show it load it for the whole page at once (selectinload).
    track_record = relationship("TrackRecord", uselist=False, cascade="all, delete-orphan", passive_deletes=True)
    # approved, proposed or rejected (REVIEW_STATES); independent of active,
    # which follows confidence: a memory is given to sessions only when both allow.
    status: Mapped[str] = mapped_column(Text, nullable=False, default=APPROVED, server_default=APPROVED)

    @property
    def service_label(self) -> str:
        return self.service or "general"

    @property
    def outcomes_label(self) -> str:
        """Its track record in words ("2 worked, 1 failed"), "" before any outcome."""
        return self.track_record.describe() if self.track_record is not None else ""

    def to_dict(self) -> dict:
        return {
            "id": self.id, "service": self.service, "category": self.category,
            "observation": self.observation, "confidence": self.confidence, "active": self.active,
            "pinned": self.pinned, "created_at": isoformat(self.created_at),
            "updated_at": isoformat(self.updated_at), "session_id": self.session_id, "tier": self.tier,
            "contradicts_id": self.contradicts_id, "status": self.status,
            "outcomes": (self.track_record or TrackRecord()).counts(),
        }


def next_decay_due(updated_at, decayed_weeks: int):
    """The moment a memory that has taken ``decayed_weeks`` is due one more."""
    return updated_at + DECAY_GRACE_PERIOD + timedelta(weeks=decayed_weeks + 1)


@event.listens_for(Memory, "before_insert")
@event.listens_for(Memory, "before_update")
def decay_schedule(mapper, connection, memory: Memory) -> None:
    """Whoever writes a memory through the ORM, its decay schedule follows
    its last reinforcement or edit and the weeks it has already taken."""
    if memory.updated_at is None:
        memory.updated_at = utcnow()
    memory.decay_due_at = next_decay_due(memory.updated_at, memory.decayed_weeks or 0)


class MemoryHistory(db.Model):
    """Every change to a memory, with what caused it. Kept when the memory is
    deleted (no foreign key on memory_id), so the audit trail survives."""

    __tablename__ = "memory_history"
    __table_args__ = (
        Index("ix_memory_history_memory_id_id", "memory_id", "id"),
        # What a session has already vouched for (plugins/memory/tally.py), read once per session.
        Index("ix_memory_history_session_id_action", "session_id", "action"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    memory_id: Mapped[int] = mapped_column(Integer, nullable=False)
    action: Mapped[str] = mapped_column(String(20), nullable=False)
    confidence_before: Mapped[float | None] = mapped_column(Float)
    confidence_after: Mapped[float | None] = mapped_column(Float)
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    actor: Mapped[str] = mapped_column(String(20), nullable=False)   # "session" or "operator" or "system"
    detail: Mapped[str | None] = mapped_column(Text)
    related_memory_id: Mapped[int | None] = mapped_column(Integer)
    created_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)

    def to_dict(self) -> dict:
        return {"id": self.id, "memory_id": self.memory_id, "action": self.action,
                "confidence_before": self.confidence_before, "confidence_after": self.confidence_after,
                "session_id": self.session_id, "actor": self.actor, "detail": self.detail,
                "related_memory_id": self.related_memory_id, "created_at": isoformat(self.created_at)}


class MemoryInjection(db.Model):
    """A memory a session was given in its system prompt, as it was then."""

    __tablename__ = "memory_injections"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False,
                                            index=True)
    memory_id: Mapped[int | None] = mapped_column(ForeignKey("memories.id", ondelete="SET NULL"), index=True)
    confidence: Mapped[float] = mapped_column(Float, nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    # Why it was packed ahead of more trusted ones ("named in the request", "recent
    # critical event"); NULL: it was among the most trusted.
    reason: Mapped[str | None] = mapped_column(String(200))


class TrackRecord(db.Model):
    """How often sessions given a memory reported that it worked, partly
    worked, failed or could not tell (``[OUTCOME:...]``). Counted as outcomes
    are recorded (each is also in the history), so that a page of memories
    reads one row per memory however long their histories grow."""

    __tablename__ = "memory_track_records"

    memory_id: Mapped[int] = mapped_column(ForeignKey("memories.id", ondelete="CASCADE"), primary_key=True)
    worked: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default=text("0"))
    partial: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default=text("0"))
    failed: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default=text("0"))
    unknown: Mapped[int] = mapped_column(Integer, nullable=False, default=0, server_default=text("0"))

    def counts(self) -> dict[str, int]:
        return {level: getattr(self, level) or 0 for level in OUTCOME_LEVELS}

    @property
    def total(self) -> int:
        return sum(self.counts().values())

    def describe(self) -> str:
        """The levels reported, in their order: "2 worked, 1 failed"."""
        return ", ".join(f"{count} {level}" for level, count in self.counts().items() if count)
