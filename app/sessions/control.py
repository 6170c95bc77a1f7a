"""Queue, claim and stop sessions through the database.

The database is the only channel between the dashboard workers and the one
scheduler process: "Run now" inserts a queued row, the scheduler claims it
atomically, and "Stop" sets a flag that the running session polls.
"""
from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from typing import Optional

from flask import current_app
from sqlalchemy import and_, case, func, or_, select, update

from app import process_identity
from app.config import TIERS
from app.echoed import echoed
from app.extensions import db
from app.models import (CLI_TRIGGER, FAILED, FINISHED_STATUSES, INTERRUPTED, QUEUED, RUNNING, STOPPED, TRIGGERS,
                        SchedulerState, Session, SessionActivity)
from app.portable_text import is_unicode
from app.redaction import redactor
from app.timeutil import utcnow
from app.write_lock import lock_for_writing

MAX_PROMPT_CHARS = 20_000
MAX_REQUEST_KEY = 80
REQUEST_KEY = re.compile(rf"[A-Za-z0-9._:-]{{1,{MAX_REQUEST_KEY}}}")
# A scheduler writes its heartbeat every 15 s: one silent for this long is not running.
SCHEDULER_STALE = timedelta(seconds=60)


class ControlError(Exception):
    """A request the current state does not allow; ``status`` is the HTTP
    code, ``field`` the request's field it is about, if one is."""

    def __init__(self, message: str, status: int = 400, field: Optional[str] = None):
        super().__init__(message)
        self.status = status
        self.field = field


class KeyUsedBefore(ControlError):
    """A request key that queued a session with another tier or prompt."""

    def __init__(self, session_id: int):
        super().__init__(f"its key queued session #{session_id} with another tier or prompt", 422)
        self.session_id = session_id


def enqueue(tier: int = 1, prompt: str | None = None, trigger: str = "api", parent_id: int | None = None,
            escalation_reason: str | None = None, request_key: str | None = None) -> Session:
    if tier not in TIERS:
        numbers = [str(number) for number in sorted(TIERS)]
        raise ControlError(f"tier must be {', '.join(numbers[:-1])} or {numbers[-1]}, not {echoed(tier)}", field="tier")
    if trigger not in TRIGGERS:
        raise ControlError(f"unknown trigger {trigger!r}")
    # An escalation carries its parent's request as stored: checked when it
    # was asked for, and redacted since, which may have made it longer.
    if trigger != "escalation":
        prompt = checked_prompt(prompt)
    session = Session(tier=tier, prompt=prompt, trigger=trigger, status=QUEUED, created_at=utcnow(),
                      parent_id=parent_id, escalation_reason=escalation_reason, request_key=request_key)
    db.session.add(session)
    db.session.commit()
    return session


def enqueue_once(key: str, name: str, tier: int, prompt: str | None, trigger: str) -> tuple[Session, bool]:
    """``enqueue``, unless the request with this ``key`` (``name``: the Run
    now form's field, or the API's header) queued a session already: a form
    sent twice, or a call retried after its answer was lost, queues one
    session. Returns the session and whether it is new. The same key sent
    with another tier or prompt raises ``KeyUsedBefore``: it is no repeat."""
    if not REQUEST_KEY.fullmatch(key):
        raise ControlError(f"{name} must be 1 to {MAX_REQUEST_KEY} letters, digits, '-', '_', '.' or ':', "
                           f"not {key[:40]!r}")
    if tier not in TIERS:
        return enqueue(tier=tier, prompt=prompt, trigger=trigger), True   # refused there, in its words
    # Kept as a digest: the key as sent may look like a credential, which the
    # redactor would rewrite on its way into the database (and so would
    # never find again). The prompt is compared as it is stored, redacted.
    stored = hashlib.sha256(f"{trigger}:{key}".encode()).hexdigest()
    wanted = (tier, redactor().redact(checked_prompt(prompt)))
    lock_for_writing()   # two sends at once: the second finds the first's session
    earlier = db.session.scalar(select(Session).where(Session.request_key == stored))
    if earlier is None:
        return enqueue(tier=tier, prompt=prompt, trigger=trigger, request_key=stored), True
    db.session.rollback()   # nothing written: the lock is let go
    if (earlier.tier, earlier.prompt) != wanted:
        raise KeyUsedBefore(earlier.id)
    return earlier, False


def claim_next() -> Session | None:
    """Mark the next queued session running and return it, or ``None``:
    an escalation first (its chain is under way), then the oldest."""
    session_id = claim_next_id()
    return None if session_id is None else claimed(session_id)


def claim_next_id() -> int | None:
    """``claim_next``, returning only the id. The claim is committed before
    the row is read back: a caller that must not leave the session
    "running" if that read fails knows which session it has claimed."""
    while True:
        candidate = db.session.scalar(
            select(Session.id).where(Session.status == QUEUED)
            .order_by((Session.trigger != "escalation"), Session.id).limit(1))
        if candidate is None:
            return None
        if take(candidate):
            return candidate


def checked_prompt(prompt: str | None) -> str | None:
    """An operator's request as it is stored (``None`` if blank); a
    ``ControlError`` says why one cannot be."""
    if prompt is None:
        return None
    if "\x00" in prompt:   # a process argument cannot hold one
        raise ControlError("prompt must not contain NUL characters", field="prompt")
    if not is_unicode(prompt):   # the database would refuse it
        raise ControlError("prompt must be text: it holds bytes that are not UTF-8, or half of a surrogate pair",
                           field="prompt")
    prompt = prompt.strip() or None
    if prompt and len(prompt) > MAX_PROMPT_CHARS:
        raise ControlError(f"prompt is {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}", field="prompt")
    return prompt


def ahead_of(session: Session) -> tuple[int | None, int]:
    """What runs before this queued session, in ``claim_next``'s order: the
    running session's id (or ``None``) and how many queued sessions come
    first (escalations, then older ones)."""
    running = db.session.scalar(select(Session.id).where(Session.status == RUNNING).limit(1))
    queued = db.session.scalar(select(func.count()).select_from(Session).where(
        Session.status == QUEUED, Session.id != session.id,
        or_(Session.trigger == "escalation", Session.id < session.id)))
    return running, queued


def scheduler_running() -> bool:
    """Is a scheduler alive to claim queued sessions? Without one (it runs
    beside the dashboard, or on another host) a queued session waits."""
    return scheduler_alive(db.session.get(SchedulerState, 1))


def scheduler_alive(state: SchedulerState | None) -> bool:
    """Whether the scheduler that published ``state`` still beats: its last
    heartbeat is recent, and, seen from its own host, its process has not
    ended since (killed outright, it could not say that it stopped)."""
    return bool(state and state.heartbeat_at and utcnow() - state.heartbeat_at < SCHEDULER_STALE
                and not process_identity.ended(state.process))


def scheduler_ended(state: SchedulerState | None) -> bool:
    """Whether the scheduler that published ``state`` is known, on its own
    host, to have ended without saying that it stopped."""
    return bool(state and state.pid is not None and process_identity.ended(state.process))


def scheduler_silent_since(state: SchedulerState | None) -> Optional[datetime]:
    """Its last heartbeat, when a scheduler that never said it stopped beats
    no more: it was killed, or it cannot write to the database (a full
    disk, a read-only file, a lock held for long) and so cannot record
    anything else either, a session's end included. None otherwise: one
    beats, or the last one stopped and said so."""
    if state is None or state.pid is None or state.heartbeat_at is None or scheduler_alive(state):
        return None
    return state.heartbeat_at


def claim(session_id: int) -> Session | None:
    """Mark one queued session running; ``None`` if it is no longer queued."""
    return claimed(session_id) if take(session_id) else None


def take(session_id: int) -> bool:
    """Mark one queued session running, committed; ``False`` if it is no
    longer queued. The conditional UPDATE makes the claim atomic: if two
    processes ever raced for a row, only one would get it."""
    taken = db.session.execute(
        update(Session).where(Session.id == session_id, Session.status == QUEUED)
        .values(status=RUNNING, started_at=utcnow())).rowcount
    db.session.commit()
    return bool(taken)


def claimed(session_id: int) -> Session:
    """The row of a session just claimed, read afresh."""
    return db.session.get(Session, session_id, populate_existing=True)


def request_stop(session_id: int) -> Session:
    """Stop a session: a queued one at once, a running one at its next poll."""
    session = db.session.get(Session, session_id)
    if session is None:
        raise ControlError(f"session {session_id} not found", 404)
    if session.status in FINISHED_STATUSES:
        raise ControlError(f"session {session_id} has already ended ({session.status})", 409)
    ended = runner_ended(session) if session.status == RUNNING else None
    if ended:
        raise ControlError(f"session {session_id} is no longer running: {ended} that ran it has ended (its "
                           "process is gone, and its CLI with it); it is marked interrupted when the service "
                           "starts again", 409)
    changed = stop_queued(session_id, "stopped by the operator before it started")
    if not changed:
        changed = db.session.execute(update(Session).where(Session.id == session_id, Session.status == RUNNING)
                                     .values(stop_requested=True)).rowcount
    db.session.commit()
    session = db.session.get(Session, session_id, populate_existing=True)
    if not changed:   # it ended between the read above and the updates: too late to stop
        raise ControlError(f"session {session_id} has already ended ({session.status})", 409)
    return session


def runner_ended(session: Session) -> Optional[str]:
    """Which process, known to have ended, was running ``session`` (it ran
    it and is gone): the scheduler, for every chain but one a `claudeops
    run` began, which runs it itself and publishes no heartbeat, and is
    known to have ended when no process holds the runner lock. None while
    it runs, or where that cannot be told. A stop asked of it would wait in
    the database for a poll that never comes."""
    from app.sessions.escalation import root   # escalation uses this module
    from app.sessions.runner_lock import held
    if root(session).trigger != CLI_TRIGGER:
        return "the scheduler" if scheduler_ended(db.session.get(SchedulerState, 1)) else None
    config = current_app.config
    return "the `claudeops run`" if held(config["CLAUDEOPS_STATE_DIR"], config["SQLALCHEMY_DATABASE_URI"]) is False \
        else None


def stop_queued(session_id: int, reason: str) -> bool:
    """End a session that has not started, as stopped; ``False`` if it has
    started (or ended) meanwhile. The caller commits."""
    return bool(db.session.execute(
        update(Session).where(Session.id == session_id, Session.status == QUEUED)
        .values(status=STOPPED, status_reason=reason, stop_requested=True, ended_at=utcnow())).rowcount)


def interrupt_queued(session_id: int, reason: str) -> bool:
    """End a session that was queued for a process that is gone, as
    interrupted, unrun; ``False`` if it is no longer queued. The caller commits."""
    return bool(db.session.execute(
        update(Session).where(Session.id == session_id, Session.status == QUEUED)
        .values(status=INTERRUPTED, status_reason=reason, ended_at=utcnow())).rowcount)


def stop_requested(session_id: int) -> bool:
    return bool(db.session.scalar(select(Session.stop_requested).where(Session.id == session_id)))


def mark_interrupted() -> int:
    """Sessions left ``running`` by a crash can never finish: say so. Each
    ends when it was last seen alive, not at the restart, however long after
    that came (its duration would count the downtime): at its last activity,
    or the last heartbeat of the scheduler that ran it, whichever is later.
    Called before this process beats (recovery.py): a heartbeat since the
    session started is the dead runner's, as no other runs beside it."""
    now = utcnow()
    heartbeat = db.session.scalar(select(SchedulerState.heartbeat_at).where(SchedulerState.id == 1))
    count = 0
    for session_id, started_at in db.session.execute(
            select(Session.id, Session.started_at).where(Session.status == RUNNING)).all():
        last_activity = db.session.scalar(select(SessionActivity.created_at).where(
            SessionActivity.session_id == session_id).order_by(SessionActivity.id.desc()).limit(1))
        seen = [when for when in (started_at, last_activity, heartbeat)
                if when is not None and (started_at is None or when >= started_at)]
        count += db.session.execute(
            update(Session).where(Session.id == session_id, Session.status == RUNNING)
            .values(status=INTERRUPTED, ended_at=min(max(seen, default=now), now),
                    status_reason="the service stopped while this session was running")).rowcount
    db.session.commit()
    return count


def end_running(session_id: int, reason: str, ended_at: Optional[datetime] = None, status: str = FAILED) -> bool:
    """End a session whose run broke off before recording its end (at
    ``ended_at``, when it broke off, however much later the database takes
    it), as failed, or as ``status`` when it came as far as deciding that;
    ``False`` if it had ended after all."""
    changed = db.session.execute(
        update(Session).where(Session.id == session_id, Session.status == RUNNING)
        .values(status=status, status_reason=reason, ended_at=ended_at or utcnow())).rowcount
    db.session.commit()
    return bool(changed)


def last_queued_and_ended(trigger: str) -> tuple[datetime | None, datetime | None]:
    """When a session of this trigger was last queued, and when the last of
    them that ran ended. One the service stopped under (``interrupted``)
    counts as queued only: its real end went unrecorded, and the time it
    was marked is that of the restart, not of the session."""
    ran = and_(Session.started_at.is_not(None), Session.status != INTERRUPTED)
    return tuple(db.session.execute(
        select(func.max(Session.created_at), func.max(case((ran, Session.ended_at))))
        .where(Session.trigger == trigger)).one())


def has_pending(trigger: str) -> bool:
    """Is a session of this trigger queued or running?"""
    return db.session.scalar(select(Session.id).where(
        Session.trigger == trigger, Session.status.in_((QUEUED, RUNNING))).limit(1)) is not None
