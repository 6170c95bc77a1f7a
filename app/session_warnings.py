"""Warnings a session may repeat thousands of times: a marker over a
per-session limit is refused again in every later text block of a runaway
agent, and a malformed marker may be written as often. The service log gets
the first of each kind per session, saying where the rest are (a refusal is
noted in the session's activity log, as a ``warning`` entry, every time), so
one session cannot flood the operator's log. Later ones go to the debug level,
as do those of kinds that name what the agent wrote beyond ``MOST_NAMED``.

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
# Kinds of one sort that name what the agent wrote (``named_kind``: an
# invalid category each), warned of per session: an agent may write any
# number of them. Kinds of the service's own are never capped, so that a
# flood of made-up categories cannot hide a limit's warning.
MOST_NAMED = 10
NAMED = "\x00"


def named_kind(kind: str, written: str) -> str:
    """A kind of warning for each value the agent wrote (``kind`` with
    ``written``): each is warned of once, up to ``MOST_NAMED`` of them."""
    return f"{kind}{NAMED}{written}"


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
    sort, named, _written = kind.partition(NAMED)
    named_before = sum(1 for k in kinds if k.startswith(sort + NAMED)) if named else 0
    if kind in kinds or named_before >= MOST_NAMED:
        log.debug("session %s: %s", session_id, message)
        return
    kinds.add(kind)
    if named and named_before + 1 == MOST_NAMED:
        later += f"; so are any others of its sort, {MOST_NAMED} having been logged"
    log.log(level, "session %s: %s (%s)", session_id, message, later)


# What a marker parser calls with a kind and a message for a marker it skips.
Warn = Callable[[str, str], None]


def log_warning(log: logging.Logger) -> Warn:
    """A ``Warn`` that logs every one: for a parser called outside a session."""
    return lambda kind, message: log.warning("%s", message)


def session_warner(log: logging.Logger, session_id: int, later: str = AT_DEBUG_LEVEL) -> Warn:
    """A ``Warn`` that logs the first of each kind in the session, as ``warn_once``."""
    return lambda kind, message: warn_once(log, session_id, kind, message, later)


def warn_of_cut_messages(log: logging.Logger, session_id: int, markers, kind: str) -> None:
    """A marker whose message was kept to its beginning (``cut_from``: the
    length the agent wrote) is stored, and the operator told, once a session."""
    for marker in markers:
        if marker.cut_from is not None:
            warn_once(log, session_id, f"{kind} message cut",
                      f"a {kind} marker's message of {marker.cut_from:,} characters is kept to its first "
                      f"{len(marker.message):,}", later=AT_DEBUG_LEVEL)
