"""The incidents table: one row per incident, opened and resolved by markers.

Defined on the host's ``db`` so that the host's drift check (upgrade, then
``claudeops db check``) covers it; created only by the revision in
``migrations/``.
"""
from __future__ import annotations

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db
from app.timeutil import UTCDateTime, isoformat, utcnow

OPEN = "open"
RESOLVED = "resolved"
STATUSES = (OPEN, RESOLVED)


class Incident(db.Model):
    __tablename__ = "incidents"
    __table_args__ = (
        # "the open incident of this service" is the question every marker asks
        Index("ix_incidents_status_service", "status", "service"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    service: Mapped[str] = mapped_column(String(100), nullable=False)
    severity: Mapped[str] = mapped_column(String(16), nullable=False)
    status: Mapped[str] = mapped_column(String(16), nullable=False, default=OPEN)
    summary: Mapped[str] = mapped_column(Text, nullable=False)   # the latest word on it
    resolution: Mapped[str | None] = mapped_column(Text)         # what the resolving marker said
    updates: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    tier: Mapped[int | None] = mapped_column(Integer)             # tier of the session that opened it
    opened_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    updated_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    resolved_at = mapped_column(UTCDateTime)
    # SET NULL: deleting a session keeps the incidents it reported.
    opened_session_id: Mapped[int | None] = mapped_column(
        ForeignKey("sessions.id", ondelete="SET NULL"), index=True)
    resolved_session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))

    def to_dict(self) -> dict:
        return {"id": self.id, "service": self.service, "severity": self.severity, "status": self.status,
                "summary": self.summary, "resolution": self.resolution, "updates": self.updates,
                "tier": self.tier, "opened_at": isoformat(self.opened_at),
                "updated_at": isoformat(self.updated_at), "resolved_at": isoformat(self.resolved_at),
                "opened_session_id": self.opened_session_id, "resolved_session_id": self.resolved_session_id}
