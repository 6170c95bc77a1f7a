"""What a process that runs sessions finds left behind by one that died.

The scheduler calls ``recover`` as it starts, and `claudeops run` before its
first session, each holding the runner lock (runner_lock.py). Only one
process holds that lock per database, and a dead holder's lock goes with it
(the kernel drops the file lock, PostgreSQL the advisory lock). So while it
is held, no other process is running sessions: what one that died left
``running``, or ``queued`` for itself, nobody is going to finish.

- A session left ``running`` is marked ``interrupted``.
- A `claudeops run` runs its chain itself, never through the queue: the
  sessions it queued for itself (its first one, for the moment between
  queueing and claiming it, and its chain's escalations) wait for nobody once
  it is gone. They end ``interrupted``, unrun, each with a warning event. No
  one else runs them: that chain was asked for in the foreground, and its
  tier 2 or 3 run later by a scheduler (before anything else queued) or by an
  unrelated `claudeops run` would act on what an earlier tier found then.
- The rest of the queue (scheduled, Run now, the API, and the escalations of
  chains the scheduler runs) is the scheduler's, whichever process that is:
  it stays queued for it, escalations first, as before.
"""
from __future__ import annotations

import logging

from sqlalchemy import select

from app.extensions import db
from app.models import CLI_TRIGGER, QUEUED, Session
from app.sessions import control, escalation
from app.sessions.leftover_groups import owner_of, wait_for_leftover_groups

log = logging.getLogger(__name__)

ABANDONED_REASON = "not run: the `claudeops run` that queued it stopped before starting it"


def recover() -> None:
    """Call only while holding the runner lock (see the module's docstring)."""
    interrupted = control.mark_interrupted()
    if interrupted:
        log.warning("marked %d session(s) left running by an earlier crash as interrupted", interrupted)
    # Its CLI may still be given its grace by its guard: never two at once.
    wait_for_leftover_groups(owner_of(db.engine.url))
    for session in abandoned_by_cli():
        end_abandoned(session)


def abandoned_by_cli() -> list[Session]:
    """Queued sessions of chains a `claudeops run` began: a chain's runner
    is the one that ran its first session (trigger ``cli``)."""
    queued = db.session.scalars(select(Session).where(
        Session.status == QUEUED, Session.trigger.in_((CLI_TRIGGER, "escalation"))).order_by(Session.id)).all()
    return [session for session in queued if escalation.root(session).trigger == CLI_TRIGGER]


def end_abandoned(session: Session) -> None:
    session_id, tier = session.id, session.tier
    what = "Escalation session" if session.trigger == "escalation" else "Session"
    ended = control.interrupt_queued(session_id, ABANDONED_REASON)
    db.session.commit()   # before the notice, whose failure rolls back
    if ended:
        message = f"{what} #{session_id} (tier {tier}) was {ABANDONED_REASON}"
        log.warning("%s", message)
        escalation.notice("warning", message, None)
