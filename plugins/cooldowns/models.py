"""The cooldowns table: one row per restart or redeployment of a service,
allowed or denied. The sliding-window counts, the page, the API, the prompt
and the PreToolUse hook all read these rows and nothing else."""
from __future__ import annotations

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.extensions import db
from app.timeutil import UTCDateTime, isoformat, utcnow

# Outcomes. "pending": the hook let the command run and the agent has not
# reported how it went (yet). "denied": refused at the limit; never counted.
PENDING = "pending"
SUCCESS = "success"
FAILURE = "failure"
DENIED = "denied"
OUTCOMES = (PENDING, SUCCESS, FAILURE, DENIED)
COUNTED = (PENDING, SUCCESS, FAILURE)   # a failed restart is still a restart

# Who wrote the row first: the PreToolUse hook, or the agent's marker alone
# (a restart done in a way the hook does not recognise).
HOOK = "hook"
MARKER = "marker"


class CooldownAction(db.Model):
    __tablename__ = "cooldown_actions"
    __table_args__ = (
        # The window count: one service and action, recent rows.
        Index("ix_cooldown_actions_service_action_created_at", "service", "action", "created_at"),
        # Retention: the oldest rows of every service.
        Index("ix_cooldown_actions_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    service: Mapped[str] = mapped_column(String(100), nullable=False)
    action: Mapped[str] = mapped_column(String(20), nullable=False)
    outcome: Mapped[str] = mapped_column(String(16), nullable=False)
    source: Mapped[str] = mapped_column(String(10), nullable=False)
    command: Mapped[str | None] = mapped_column(Text)      # what the hook saw
    message: Mapped[str | None] = mapped_column(Text)      # the agent's report, or why it was denied
    # SET NULL: deleting a session must not give its restarts back.
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"), index=True)
    tier: Mapped[int | None] = mapped_column(Integer)
    created_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)   # when it ran: the window counts from here
    reported_at = mapped_column(UTCDateTime)                                  # when the agent's marker said how it went

    @property
    def counted(self) -> bool:
        return self.outcome in COUNTED

    def to_dict(self) -> dict:
        return {"id": self.id, "service": self.service, "action": self.action, "outcome": self.outcome,
                "counted": self.counted, "source": self.source, "command": self.command,
                "message": self.message, "session_id": self.session_id, "tier": self.tier,
                "created_at": isoformat(self.created_at), "reported_at": isoformat(self.reported_at)}
