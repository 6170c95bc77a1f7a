"""The one truth about cooldowns: rows in ``cooldown_actions`` and the
sliding-window arithmetic over them. The hook, the markers, the prompt, the
page, the API and the CLI all go through here.

A row is written when the PreToolUse hook lets a recognised command run
(``pending``: it counts from that moment, whether or not the agent reports
it) or denies one (``denied``: shown, never counted). The agent's marker then
sets the outcome of the latest pending row of its session, service and
action (a failure with none answers a denial of them instead), or adds a
row of its own for a restart the hook did not see.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Optional

from sqlalchemy import bindparam, event, func, select
from sqlalchemy.orm import Session

from app.extensions import db
from app.timeutil import isoformat, utcnow
from plugins.cooldowns.limits import ACTIONS, Limit, current_limits, format_window
from plugins.cooldowns.models import COUNTED, DENIED, FAILURE, HOOK, MARKER, PENDING, CooldownAction

# How far back the status lists a service that has gone quiet.
STATUS_DAYS = 7
SESSION_ROWS = "claudeops.cooldowns.session_rows"


@dataclass(frozen=True)
class Usage:
    """One service and action against its limit at one moment."""

    service: str
    action: str
    used: int
    limit: Limit
    next_free_at: Optional[datetime]     # when one more is allowed again; None if it is now (or never: count 0)

    @property
    def remaining(self) -> int:
        return max(self.limit.count - self.used, 0)

    @property
    def at_limit(self) -> bool:
        return self.used >= self.limit.count

    @property
    def near_limit(self) -> bool:
        """At the limit, or one away from it after at least one use."""
        return self.at_limit or (self.used > 0 and self.remaining <= 1)

    def to_dict(self) -> dict:
        return {"used": self.used, "limit": self.limit.count, "window": format_window(self.limit.window),
                "remaining": self.remaining, "at_limit": self.at_limit, "near_limit": self.near_limit,
                "next_free_at": isoformat(self.next_free_at)}


# Built once: a stream's cooldown reports run them for every report.
_COUNTED_TIMES = select(CooldownAction.created_at).where(
    CooldownAction.service == bindparam("service"), CooldownAction.action == bindparam("action"),
    CooldownAction.outcome.in_(COUNTED), CooldownAction.created_at > bindparam("since"),
    CooldownAction.created_at <= bindparam("now")).order_by(CooldownAction.created_at)
# By whether the session is known (an operator's report from the CLI has none).
_LATEST_PENDING = {known: select(CooldownAction).where(
    CooldownAction.session_id == bindparam("session_id") if known else CooldownAction.session_id.is_(None),
    CooldownAction.service == bindparam("service"), CooldownAction.action == bindparam("action"),
    CooldownAction.outcome == PENDING).order_by(CooldownAction.created_at.desc(), CooldownAction.id.desc()).limit(1)
    for known in (True, False)}
_SESSION_ROWS = select(func.count()).select_from(CooldownAction).where(
    CooldownAction.session_id == bindparam("session_id"))
_SESSION_PENDING = select(CooldownAction).where(
    CooldownAction.session_id == bindparam("session_id"), CooldownAction.outcome == PENDING).order_by(
    CooldownAction.created_at.desc(), CooldownAction.id.desc())
# A session's denials no report has answered yet, oldest first.
_SESSION_UNREPORTED_DENIALS = select(CooldownAction).where(
    CooldownAction.session_id == bindparam("session_id"), CooldownAction.outcome == DENIED,
    CooldownAction.reported_at.is_(None)).order_by(CooldownAction.created_at, CooldownAction.id)

Pair = tuple[str, str]   # service, action


def usage(service: str, action: str, now: Optional[datetime] = None,
          limits: Optional[dict[str, Limit]] = None, counted: Optional[list[datetime]] = None) -> Usage:
    """``counted``: the times of the service's counted rows of ``action``
    (``counted_times``), if already read; else they are read here."""
    now = now or utcnow()
    limit = (limits or current_limits())[action]
    if counted is None:
        times = db.session.scalars(_COUNTED_TIMES, {"service": service, "action": action,
                                                    "since": now - limit.window, "now": now}).all()
    else:
        times = sorted(t for t in counted if now - limit.window < t <= now)
    next_free_at = None
    if limit.count and len(times) >= limit.count:
        # Sliding window: one more is allowed once all but count-1 of these have aged out.
        next_free_at = times[len(times) - limit.count] + limit.window
    return Usage(service, action, len(times), limit, next_free_at)


def status(now: Optional[datetime] = None, service: Optional[str] = None) -> list[dict[str, Usage]]:
    """Both actions of every service with a row in the last STATUS_DAYS (or
    inside the longest window), most constrained first."""
    now = now or utcnow()
    limits = current_limits()
    since = now - max([timedelta(days=STATUS_DAYS)] + [limit.window for limit in limits.values()])
    query = select(CooldownAction.service).distinct().where(CooldownAction.created_at > since)
    if service:
        query = query.where(CooldownAction.service == service)
    rows = [{action: usage(name, action, now, limits) for action in ACTIONS}
            for name in db.session.scalars(query).all()]
    rows.sort(key=lambda row: (-sum(u.at_limit for u in row.values()), -sum(u.near_limit for u in row.values()),
                               next(iter(row.values())).service))
    return rows


def constrained(now: Optional[datetime] = None) -> list[Usage]:
    """Every service and action at or near its limit."""
    return [u for row in status(now) for u in row.values() if u.near_limit and u.used]


def record_attempt(action: str, service: str, outcome: str, command: str, session_id: Optional[int],
                   tier: Optional[int], message: Optional[str] = None,
                   now: Optional[datetime] = None) -> CooldownAction:
    """What the hook saw: ``pending`` (let through) or ``denied``."""
    if outcome not in (PENDING, DENIED):
        raise ValueError(f"the hook records pending or denied actions, not {outcome!r}")
    row = CooldownAction(service=service, action=action, outcome=outcome, source=HOOK, command=command,
                         message=message, session_id=session_id, tier=tier, created_at=now or utcnow())
    db.session.add(row)
    return row


def counted_times(pairs: Iterable[Pair], now: datetime, limits: dict[str, Limit]) -> dict[Pair, list[datetime]]:
    """For ``usage(counted=...)``: the times of the counted rows of each
    service and action inside the longest window, in one statement for a
    batch of reports."""
    found: dict[Pair, list[datetime]] = {pair: [] for pair in pairs}
    services = sorted({service for service, _ in found})
    if not services:
        return found
    since = now - max(limit.window for limit in limits.values())
    for service, action, created_at in db.session.execute(
            select(CooldownAction.service, CooldownAction.action, CooldownAction.created_at).where(
                CooldownAction.service.in_(services), CooldownAction.outcome.in_(COUNTED),
                CooldownAction.created_at > since, CooldownAction.created_at <= now)):
        if (service, action) in found:
            found[service, action].append(created_at)
    return found


def pending_rows(session_id: int) -> dict[Pair, list[CooldownAction]]:
    """For ``record_outcome(pending=...)``: the session's pending rows by
    service and action, latest first, in one statement for a batch of reports."""
    found: dict[Pair, list[CooldownAction]] = {}
    for row in db.session.scalars(_SESSION_PENDING, {"session_id": session_id}):
        found.setdefault((row.service, row.action), []).append(row)
    return found


def unreported_denials(session_id: int) -> dict[Pair, list[CooldownAction]]:
    """For ``record_outcome(denied=...)``: the session's denials no report has
    answered, by service and action, oldest first."""
    found: dict[Pair, list[CooldownAction]] = {}
    for row in db.session.scalars(_SESSION_UNREPORTED_DENIALS, {"session_id": session_id}):
        found.setdefault((row.service, row.action), []).append(row)
    return found


def record_outcome(action: str, service: str, outcome: str, message: str, session_id: Optional[int],
                   tier: Optional[int], now: Optional[datetime] = None, may_create: bool = True,
                   pending: Optional[dict[Pair, list[CooldownAction]]] = None,
                   denied: Optional[dict[Pair, list[CooldownAction]]] = None,
                   ) -> tuple[Optional[CooldownAction], bool]:
    """The agent's report. Completes the latest pending row of the same
    session, service and action. Else a ``failure`` answers the session's
    oldest unanswered denial of them, if ``denied`` (``unreported_denials``)
    holds one: the refused restart did fail, and stays uncounted (it keeps
    the reason it was denied, the report added; the report's time is set). Else (a restart the
    hook did not see, or one reported twice) it adds a counted row, unless
    ``may_create`` is false (the session reached its limit of records): then
    nothing is stored and the row is None. Returns the row and whether it is
    new. ``pending``: the session's pending rows (``pending_rows``), if
    already read; the row completed is taken from it."""
    now = now or utcnow()
    if pending is None:
        row = db.session.scalar(_LATEST_PENDING[session_id is not None],
                                {"session_id": session_id, "service": service, "action": action})
    else:
        waiting = pending.get((service, action))
        row = waiting.pop(0) if waiting else None
    refused = (denied or {}).get((service, action)) if row is None and outcome == FAILURE else None
    if refused:
        row = refused.pop(0)
        # Its reason kept, and the agent's own account beside it, for the operator to judge.
        if message:
            row.message = f"{row.message}; the agent reported: {message}" if row.message else message
        row.reported_at = now
        return row, False
    created = row is None
    if created and not may_create:
        return None, False
    if created:
        row = CooldownAction(service=service, action=action, source=MARKER, session_id=session_id, tier=tier,
                             created_at=now)
        db.session.add(row)
        if session_id is not None:
            note_session_row(session_id)
    row.outcome, row.message, row.reported_at = outcome, message or None, now
    return row, created


def session_rows(session_id: int) -> int:
    """Rows a session has (hook and marker, every outcome): what its limit
    counts. Read once a transaction, then counted as markers add rows: a
    stream's batch may hold hundreds of reports, and the hook's rows,
    written by another process, are seen from the next transaction on anyway."""
    counts = db.session.info.setdefault(SESSION_ROWS, {})
    if session_id not in counts:
        counts[session_id] = db.session.scalar(_SESSION_ROWS, {"session_id": session_id})
    return counts[session_id]


def note_session_row(session_id: int) -> None:
    """A marker added a row to the session (``record_outcome`` created one)."""
    counts = db.session.info.get(SESSION_ROWS, {})
    if session_id in counts:
        counts[session_id] += 1


@event.listens_for(Session, "after_transaction_end")
def _count_again_next_transaction(session: Session, transaction) -> None:
    if transaction.parent is None and not transaction.nested:
        session.info.pop(SESSION_ROWS, None)


@event.listens_for(Session, "after_soft_rollback")
def _count_again_after_a_rollback(session: Session, previous_transaction) -> None:
    """A rollback, to a savepoint or of everything, may take rows it counted."""
    session.info.pop(SESSION_ROWS, None)


def recent(service: Optional[str] = None, action: Optional[str] = None, outcome: Optional[str] = None):
    """The rows, newest first, as a query to count or page."""
    query = select(CooldownAction)
    if service:
        query = query.where(CooldownAction.service == service)
    if action:
        query = query.where(CooldownAction.action == action)
    if outcome:
        query = query.where(CooldownAction.outcome == outcome)
    return query.order_by(CooldownAction.created_at.desc(), CooldownAction.id.desc())


def count(query) -> int:
    return db.session.scalar(select(func.count()).select_from(query.order_by(None).subquery()))


def denials_since(since: datetime) -> int:
    return db.session.scalar(select(func.count()).select_from(CooldownAction).where(
        CooldownAction.outcome == DENIED, CooldownAction.created_at >= since))


def services() -> list[str]:
    # Sorted here, not by the database, whose collation (PostgreSQL's locale) may differ from SQLite's.
    return sorted(db.session.scalars(select(CooldownAction.service).distinct()))


def explain(usages: Iterable[Usage]) -> str:
    """'restart of jellyfin: 2 of 2 in 4h used, next allowed at …'."""
    parts = []
    for u in usages:
        if u.limit.count == 0:
            parts.append(f"{u.action} of {u.service}: not allowed at all (limit 0)")
            continue
        when = f"next allowed at {isoformat(u.next_free_at)}" if u.next_free_at else f"{u.remaining} left"
        parts.append(f"{u.action} of {u.service}: {u.used} of {u.limit.count} in {format_window(u.limit.window)} "
                     f"used, {when}")
    return "; ".join(parts)
