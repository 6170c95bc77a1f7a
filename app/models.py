"""The host's tables: sessions and their activity log. Plugins own theirs."""
from __future__ import annotations

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import db
from app.timeutil import UTCDateTime, isoformat, utcnow

QUEUED = "queued"
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
STOPPED = "stopped"
TIMED_OUT = "timed_out"
INTERRUPTED = "interrupted"

STATUSES = (QUEUED, RUNNING, COMPLETED, FAILED, STOPPED, TIMED_OUT, INTERRUPTED)
FINISHED_STATUSES = frozenset({COMPLETED, FAILED, STOPPED, TIMED_OUT, INTERRUPTED})

# A session `claudeops run` began: it runs that chain itself, in the foreground.
CLI_TRIGGER = "cli"
TRIGGERS = ("schedule", "dashboard", "api", CLI_TRIGGER, "escalation")


class Session(db.Model):
    __tablename__ = "sessions"
    __table_args__ = (
        # Retention: the finished sessions whose logs are still kept, oldest
        # first, without reading the ones already pruned.
        Index("ix_sessions_logs_removed_at_ended_at", "logs_removed_at", "ended_at"),
        # What the last 24 hours of sessions cost (app/sessions/spending.py,
        # /api/v1/stats), read from the index alone.
        Index("ix_sessions_ended_at_cost_usd", "ended_at", "cost_usd"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tier: Mapped[int] = mapped_column(Integer, nullable=False)
    model: Mapped[str | None] = mapped_column(String(100))
    trigger: Mapped[str] = mapped_column(String(20), nullable=False)
    prompt: Mapped[str | None] = mapped_column(Text)  # the operator's ad-hoc request
    status: Mapped[str] = mapped_column(String(20), nullable=False, default=QUEUED, index=True)
    status_reason: Mapped[str | None] = mapped_column(Text)
    stop_requested: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    created_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)
    started_at = mapped_column(UTCDateTime)
    ended_at = mapped_column(UTCDateTime)
    system_prompt: Mapped[str | None] = mapped_column(Text)
    response: Mapped[str | None] = mapped_column(Text)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    num_turns: Mapped[int | None] = mapped_column(Integer)
    duration_ms: Mapped[int | None] = mapped_column(Integer)
    is_error: Mapped[bool] = mapped_column(Boolean, nullable=False, default=False)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    cli_session_id: Mapped[str | None] = mapped_column(String(64))
    log_path: Mapped[str | None] = mapped_column(Text)
    # The results directory the run log went to (app/sessions/results_dir.py).
    results_dir_id: Mapped[str | None] = mapped_column(String(32))
    # The request that queued it, once: its key's SHA-256 (app/sessions/control.py: enqueue_once).
    request_key: Mapped[str | None] = mapped_column(String(100), unique=True, index=True)
    # Escalation: the session that asked for this one, and why.
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"), index=True)
    escalation_reason: Mapped[str | None] = mapped_column(Text)
    # When retention (CLAUDEOPS_LOG_RETENTION_DAYS) removed the activity log
    # and run log files; the session row itself is kept.
    logs_removed_at = mapped_column(UTCDateTime)

    activity = relationship("SessionActivity", back_populates="session", cascade="all, delete-orphan",
                            passive_deletes=True, order_by="SessionActivity.id")

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def elapsed_ms(self) -> int | None:
        """Wall-clock time from start to end (or to now, while it runs)."""
        if self.started_at is None:
            return None
        return int(((self.ended_at or utcnow()) - self.started_at).total_seconds() * 1000)

    def to_dict(self, detail: bool = False) -> dict:
        data = {
            "id": self.id,
            "tier": self.tier,
            "model": self.model,
            "trigger": self.trigger,
            "prompt": self.prompt,
            "status": self.status,
            "status_reason": self.status_reason,
            "created_at": isoformat(self.created_at),
            "started_at": isoformat(self.started_at),
            "ended_at": isoformat(self.ended_at),
            "cost_usd": self.cost_usd,
            "num_turns": self.num_turns,
            "duration_ms": self.duration_ms,
            "is_error": self.is_error,
            "exit_code": self.exit_code,
            "cli_session_id": self.cli_session_id,
            "parent_id": self.parent_id,
            "escalation_reason": self.escalation_reason,
            "logs_removed_at": isoformat(self.logs_removed_at),
        }
        if detail:
            data["response"] = self.response
            data["system_prompt"] = self.system_prompt
        return data


class SessionActivity(db.Model):
    """One line of a session's activity log: agent text, a tool call, a tool
    result, a marker a plugin recorded, or a notice from the host."""

    __tablename__ = "session_activity"
    __table_args__ = (Index("ix_session_activity_session_id_id", "session_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)
    kind: Mapped[str] = mapped_column(String(20), nullable=False)  # text, tool_use, tool_result, marker, system, warning
    title: Mapped[str | None] = mapped_column(String(200))
    body: Mapped[str | None] = mapped_column(Text)
    created_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)

    session = relationship("Session", back_populates="activity")

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "title": self.title, "body": self.body,
                "created_at": isoformat(self.created_at)}


class RuntimeSetting(db.Model):
    """An operator's change to a setting, made while the service runs (/config);
    it wins over the environment until removed."""

    __tablename__ = "runtime_settings"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text, nullable=False)
    updated_at = mapped_column(UTCDateTime, nullable=False, default=utcnow)


class SchedulerState(db.Model):
    """What the one scheduler tells the dashboard workers: that it is alive,
    and when the next scheduled session is due. One row, id 1."""

    __tablename__ = "scheduler_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pid: Mapped[int | None] = mapped_column(Integer)
    # Who beats, in app/process_identity.py's terms: a dashboard on the same
    # host sees at once that this process has ended.
    process: Mapped[str | None] = mapped_column(String(120))
    started_at = mapped_column(UTCDateTime)
    heartbeat_at = mapped_column(UTCDateTime)
    next_run_at = mapped_column(UTCDateTime)


class DashboardLogin(db.Model):
    """A dashboard login not yet ended. Its cookie holds a random token and
    this row only the token's SHA-256, so the table gives no login away.
    Logging out deletes the row: a copy of the cookie ends with it."""

    __tablename__ = "dashboard_logins"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    # Logins older than CLAUDEOPS_LOGIN_HOURS are deleted at the next login.
    created_at = mapped_column(UTCDateTime, nullable=False, default=utcnow, index=True)


class RateLimitWindow(db.Model):
    """How many times a client has hit a limit (wrong passwords, wrong
    bearer tokens) in the current window, shared by every gunicorn worker
    and dashboard host: app/limit_store.py. Windows last a minute; an
    expired one is deleted by the next hit of any client."""

    __tablename__ = "rate_limit_windows"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    hits: Mapped[int] = mapped_column(Integer, nullable=False)
    # Seconds since the epoch, as the limits library reckons a window's end.
    expires_at: Mapped[float] = mapped_column(Float, nullable=False, index=True)
