"""Escalation: a session may ask for the next tier; the host decides.

The request comes from a plugin (``claudeops_escalation``); the host checks
it and queues the next tier as a child session (trigger ``escalation``,
``parent_id`` set), which the scheduler runs before anything else queued
(``claudeops run`` runs it at once, in the foreground; killed before it
does, the next process to run sessions ends it unrun: see recovery.py).
Tiers only go up and stop at ``CLAUDEOPS_MAX_TIER``, and a session has at
most one child, so a chain can never loop. The maximum is a runtime setting:
an escalation still queued when it is lowered below its tier is not run. In dry run nothing is escalated,
and an event says what would have been.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Optional

from sqlalchemy import or_, select

from app import dbfaults
from app.config import TIERS
from app.extensions import db
from app.models import COMPLETED, QUEUED, Session, SessionActivity
from app.plugin_types import RunInfo, SessionResult
from app.plugins import call_each, call_first
from app.redaction import redactor
from app.runtime import setting
from app.sessions import control
from app.timeutil import utcnow

log = logging.getLogger(__name__)

MAX_REASON_CHARS = 2000


def requested(run: RunInfo, result: SessionResult) -> Optional[str]:
    """The reason a plugin gives for escalating the session, as the host
    keeps it, or None. Asked once a session: a plugin may hand its request
    over only once (the built-in one does), so a ``consider`` done again
    after a database server went away is given this answer, not the hook's
    second one."""
    # Each plugin asked on its own: one that raises must not silence the others' requests.
    # A reason is a string: True or a number would escalate "because True";
    # a blank one, asked first, would silence the plugins after it.
    reason = call_first("claudeops_escalation", str, meaningful=str.strip, run=run, result=result)
    if reason is None:
        return None
    # Redacted before the cut: cut first, a secret running past it would be
    # kept by its first half, which the redactor no longer knows.
    return redactor().redact(" ".join(reason.split()))[:MAX_REASON_CHARS]


def consider(session: Session, run: RunInfo, result: SessionResult, reason: Optional[str],
             shutdown: Optional[threading.Event] = None) -> Optional[Session]:
    """The child session queued if a plugin asked for one (``reason``, from
    ``requested``) and the host grants it, else None (a notice says why not,
    where that matters). A database server that goes away before the child
    is queued raises with nothing committed, so ``consider`` may simply be
    called again; the notices wait for it themselves."""
    if reason is None:
        return None
    next_tier = session.tier + 1
    refusal = _refusal(session, result, next_tier)
    badge = _badge(session.id)
    if refusal:
        if badge is not None and badge != REFUSED_BADGE:
            _correct(session.id, "warning", REFUSED_BADGE, f"{reason}; {refusal[1]} (so it was decided as the "
                                                           "session ended)")
        asked = f"to tier {next_tier}" if next_tier in TIERS else f"past tier {session.tier}"
        notice("warning" if refusal[0] else "info", f"Session #{session.id} asked to escalate {asked} "
               f"({reason}); {refusal[1]}", run, shutdown)
        return None
    child = control.enqueue(tier=next_tier, prompt=session.prompt, trigger="escalation",
                            parent_id=session.id, escalation_reason=reason)
    if badge == REFUSED_BADGE:
        _correct(session.id, "marker", f"escalation:to tier {next_tier}",
                 f"{reason}; queued as session #{child.id}: the settings as the session ended allowed it")
    log.info("session %s escalated to tier %s as session %s: %s", session.id, next_tier, child.id, reason)
    notice("warning", f"Session #{session.id} escalated to tier {next_tier} ({TIERS[next_tier]}) as "
           f"session #{child.id}: {reason}", run, shutdown)
    return child


@dataclass(frozen=True)
class Undecided:
    """An escalation a session asked for that the database refused to
    decide as it ended (full, read-only, locked past its busy timeout, a
    server not back in time): what ``consider`` is given, kept to try again."""

    session_id: int
    run: RunInfo
    result: SessionResult
    reason: str


def consider_again(undecided: Undecided, shutdown: Optional[threading.Event] = None) -> Optional[Session]:
    """``consider`` for an ``Undecided`` escalation, unless its child was
    queued before the fault (a write after it failed: a second would run the
    same investigation twice) or the session is gone (deleted meanwhile)."""
    session = db.session.get(Session, undecided.session_id)
    if session is None or db.session.scalar(
            select(Session.id).where(Session.parent_id == session.id, Session.trigger == "escalation").limit(1)):
        return None
    return consider(session, undecided.run, undecided.result, undecided.reason, shutdown)


# The activity log's badge of a refused [ESCALATE] (plugins/escalation).
REFUSED_BADGE = "escalation:refused"


def _badge(session_id: int) -> Optional[str]:
    """What the activity log said of the session's first [ESCALATE] as the
    agent wrote it, or None: a forecast from the settings then, which the
    decision at the session's end may not bear out (the maximum tier or dry
    run changed meanwhile, the session failed)."""
    return db.session.scalar(select(SessionActivity.title).where(
        SessionActivity.session_id == session_id,
        or_(SessionActivity.title == REFUSED_BADGE, SessionActivity.title.like("escalation:to tier %")))
        .order_by(SessionActivity.id).limit(1))


def _correct(session_id: int, kind: str, title: str, body: str) -> None:
    """The decision, in the activity log below the badge it overrules."""
    db.session.add(SessionActivity(session_id=session_id, kind=kind, title=title, body=body, created_at=utcnow()))


def _refusal(session: Session, result: SessionResult, next_tier: int) -> Optional[tuple[bool, str]]:
    """(is it a warning, why) when the request is not granted, else None."""
    if result.status != COMPLETED:
        return True, f"not escalated because the session ended {result.status}"
    # Stop pressed in the CLI's last moments (the runner looks for it once a
    # second, and not once the CLI has exited) was accepted: it ends the chain.
    if control.stop_requested(session.id):
        return False, "not escalated: the operator asked to stop it"
    beyond = beyond_maximum(next_tier)
    if beyond:
        return True, beyond
    if setting("CLAUDEOPS_DRY_RUN"):
        return False, DRY_RUN_REFUSAL
    if db.session.scalar(select(Session.id).where(Session.parent_id == session.id).limit(1)):
        return True, "not escalated: it already has a child session"
    return None


DRY_RUN_REFUSAL = "not escalated: dry run (CLAUDEOPS_DRY_RUN) is on"


def beyond_maximum(tier: int) -> Optional[str]:
    """Why no session may escalate to ``tier`` now (``None`` if one may).
    Known before a session ends: its marker's badge says so at once."""
    if tier not in TIERS:   # no setting could allow it
        top = max(TIERS)
        return f"not escalated: tier {top} ({TIERS[top]}) is the highest tier"
    max_tier = setting("CLAUDEOPS_MAX_TIER")
    return f"not escalated: CLAUDEOPS_MAX_TIER is {max_tier}" if tier > max_tier else None


def stop_beyond_maximum() -> None:
    """Escalations queued at a tier above ``CLAUDEOPS_MAX_TIER`` (lowered on
    /config since they were queued) end stopped, unrun, each with an event.
    A session the operator queued at a tier is theirs, and runs."""
    max_tier = setting("CLAUDEOPS_MAX_TIER")
    why = f"CLAUDEOPS_MAX_TIER is {max_tier} since it was queued"
    queued = db.session.execute(select(Session.id, Session.tier).where(
        Session.status == QUEUED, Session.trigger == "escalation", Session.tier > max_tier)).all()
    for session_id, tier in queued:
        stopped = control.stop_queued(session_id, f"not run: {why}")
        db.session.commit()   # before the notice, whose failure rolls back
        if stopped:
            log.info("escalation session %s (tier %s) not run: %s", session_id, tier, why)
            notice("warning", f"Escalation session #{session_id} (tier {tier}) was not run: {why}", None)


def notice(level: str, message: str, run: Optional[RunInfo], shutdown: Optional[threading.Event] = None) -> None:
    """Tell the operator through whatever records notices (the events
    plugin). A database server that went away is waited for (until
    ``shutdown``, at most dbfaults.OUTAGE_SECONDS); a notice that cannot be
    recorded is logged, and costs its caller nothing."""
    def record() -> None:
        call_each("claudeops_notice", level=level, message=message, service=None, run=run)
        db.session.commit()

    try:
        dbfaults.waiting_out(record, "recording a notice", shutdown)
    except Exception:
        log.exception("could not record notice: %s", message)
        dbfaults.roll_back()


def queued_child(session: Session) -> Optional[Session]:
    """The session's escalation, if one was queued and has not started."""
    return db.session.scalar(select(Session).where(Session.parent_id == session.id, Session.status == QUEUED)
                             .limit(1))


def root(session: Session) -> Session:
    """The session that began the session's chain (itself, if none did)."""
    first = session
    seen = {first.id}
    while first.parent_id and first.parent_id not in seen:
        parent = db.session.get(Session, first.parent_id)
        if parent is None:
            break
        seen.add(parent.id)
        first = parent
    return first


def chain(session: Session) -> list[Session]:
    """The session's whole chain, root first: its ancestors, it, its descendants."""
    members = [root(session)]
    while True:
        child = db.session.scalar(select(Session).where(Session.parent_id == members[-1].id).limit(1))
        if child is None or child.id in {m.id for m in members}:
            return members
        members.append(child)
