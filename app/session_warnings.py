"""Warnings a session may repeat thousands of times: a marker over a
per-session limit is refused again in every later text block of a runaway
agent. The service log gets the first of each kind per session, saying that
the rest are noted in the session's activity log only (each refusal still is,
as a ``warning`` entry), so one session cannot flood the operator's log.
Later ones go to the debug level.

What was warned of is kept in the database session's ``info``, which lives
as long as the application context that runs the session."""
from __future__ import annotations

import logging
from collections import OrderedDict

from app.extensions import db

WARNED = "claudeops.session_warnings"
# Sessions remembered: one runs at a time, so a few are plenty.
REMEMBERED_SESSIONS = 64


def warn_once(log: logging.Logger, session_id: int, kind: str, message: str) -> None:
    """``message`` as a warning the first time ``kind`` comes up in the session, as debug after."""
    warned: OrderedDict[int, set[str]] = db.session.info.setdefault(WARNED, OrderedDict())
    kinds = warned.setdefault(session_id, set())
    warned.move_to_end(session_id)
    while len(warned) > REMEMBERED_SESSIONS:
        warned.popitem(last=False)
    if kind in kinds:
        log.debug("session %s: %s", session_id, message)
        return
    kinds.add(kind)
    log.warning("session %s: %s (further ones in this session are noted in its activity log only)",
                session_id, message)
