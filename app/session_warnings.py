"""Warnings a session may repeat thousands of times: a marker over a
per-session limit is refused again in every later text block of a runaway
agent, and a malformed marker may be written as often. The service log gets
the first of each kind per session, saying where the rest are (a refusal is
noted in the session's activity log, as a ``warning`` entry, every time), so
one session cannot flood the operator's log. Later ones go to the debug level.

What was warned of is kept in the database session's ``info``, which lives
as long as the application context that runs the session."""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Callable

from app.extensions import db

WARNED = "claudeops.session_warnings"
# Sessions remembered: one runs at a time, so a few are plenty.
REMEMBERED_SESSIONS = 64
# Kinds warned of per session: a kind may name what the agent wrote (an
# invalid category), and an agent may write any number of them.
MOST_KINDS = 50


IN_ACTIVITY_LOG = "further ones in this session are noted in its activity log only"
AT_DEBUG_LEVEL = "further ones in this session are logged at debug level"


def warn_once(log: logging.Logger, session_id: int, kind: str, message: str, later: str = IN_ACTIVITY_LOG,
              level: int = logging.WARNING) -> None:
    """``message`` as a warning (or at ``level``) the first time ``kind`` comes
    up in the session, as debug after; ``later`` says where the operator
    finds the later ones."""
    warned: OrderedDict[int, set[str]] = db.session.info.setdefault(WARNED, OrderedDict())
    kinds = warned.setdefault(session_id, set())
    warned.move_to_end(session_id)
    while len(warned) > REMEMBERED_SESSIONS:
        warned.popitem(last=False)
    if kind in kinds or len(kinds) > MOST_KINDS:
        log.debug("session %s: %s", session_id, message)
        return
    kinds.add(kind)
    if len(kinds) > MOST_KINDS:
        log.log(level, "session %s: %s (%s; so are the warnings of any other kind, %d kinds having been logged)",
                session_id, message, later, MOST_KINDS)
        return
    log.log(level, "session %s: %s (%s)", session_id, message, later)


# What a marker parser calls with a kind and a message for a marker it skips.
Warn = Callable[[str, str], None]


def log_warning(log: logging.Logger) -> Warn:
    """A ``Warn`` that logs every one: for a parser called outside a session."""
    return lambda kind, message: log.warning("%s", message)


def session_warner(log: logging.Logger, session_id: int, later: str = AT_DEBUG_LEVEL) -> Warn:
    """A ``Warn`` that logs the first of each kind in the session, as ``warn_once``."""
    return lambda kind, message: warn_once(log, session_id, kind, message, later)
