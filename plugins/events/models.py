"""The events table."""
from __future__ import annotations

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db
from app.timeutil import UTCDateTime, isoformat, utcnow


class Event(db.Model):
    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_level_id", "level", "id"),
        Index("ix_events_service_id", "service", "id"),
        # The last 24 hours (Overview, stats) without reading the year before.
        Index("ix_events_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # SET NULL: deleting a session keeps the record of what it reported.
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"), index=True)
    tier: Mapped[int | None] = mapped_column(Integer)
    level: Mapped[str] = mapped_column(String(16), nullable=False)
    service: Mapped[str | None] = mapped_column(String(100))
    message: Mapped[str] = mapped_column(Text, nullable=False)
    created_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)

    def to_dict(self) -> dict:
        return {"id": self.id, "session_id": self.session_id, "tier": self.tier, "level": self.level,
                "service": self.service, "message": self.message, "created_at": isoformat(self.created_at)}
