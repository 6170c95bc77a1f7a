"""``[EVENT:<level>] message`` and ``[EVENT:<level>:<service>] message``.

A marker may stand anywhere in a line; its message runs to the end of the line
or to the next marker of an installed plugin on that line, whichever comes
first (``app.marker_text``).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

from app.marker_text import BUILT_IN_TAGS, marker_text
from app.session_warnings import Warn, log_warning

log = logging.getLogger(__name__)

LEVELS = ("info", "warning", "critical")

# Variants an agent writes, mapped to the three levels the dashboard filters by.
LEVEL_ALIASES = {
    "info": "info", "information": "info", "informational": "info", "notice": "info",
    "ok": "info", "debug": "info",
    "warning": "warning", "warn": "warning", "warnings": "warning",
    "critical": "critical", "crit": "critical", "error": "critical", "err": "critical",
    "fatal": "critical", "alert": "critical", "emergency": "critical", "severe": "critical",
}

MAX_MESSAGE_CHARS = 2000
MAX_SERVICE_CHARS = 100

# What every event marker begins with (the ``claudeops_marker_tags`` hook).
MARKER_TAGS = ("[EVENT:",)
# The marker without its message, which is read from its end (marker_text).
# A service as a unit (getty@tty1, systemd's templates, as the cooldowns
# plugin records its restarts), a host (db.lan) or a kubernetes object (deploy/web).
EVENT_MARKER = re.compile(r"\[EVENT:(?P<level>[A-Za-z]+)(?::(?P<service>[A-Za-z0-9_.@\-/]+))?\][ \t]*")
# Anything shaped like an event marker, so that one the agent wrote wrong (a
# service with a port or a space in it) is reported instead of silently dropped.
# It ends at anything shaped like the start of a marker: one left without its
# "]" must not take in the next marker, a well-formed one, and lose it with itself.
ANY_EVENT_MARKER = re.compile(r"\[EVENT:(?:(?!\[[A-Z]+:)[^\]\n])*\]")


@dataclass(frozen=True)
class EventMarker:
    level: str
    service: Optional[str]
    message: str
    # The length of the message the agent wrote, when it was cut to MAX_MESSAGE_CHARS.
    cut_from: Optional[int] = field(default=None, compare=False)


def normalise_level(raw: str) -> Optional[str]:
    return LEVEL_ALIASES.get(raw.lower())


def parse_event_markers(text: str, warn: Optional[Warn] = None,
                        tags: Iterable[str] = BUILT_IN_TAGS) -> list[EventMarker]:
    """Every well-formed event marker in ``text``, in order; a message ends
    at the next of ``tags`` (``run.marker_tags``) on its line. A marker with
    an unknown level, a service it cannot read or no message is skipped and
    told to ``warn`` (the log by default)."""
    warn = warn or log_warning(log)
    tags = (*tags, *MARKER_TAGS)   # its own too, whoever calls: a line of markers stays linear
    markers = []
    for candidate in ANY_EVENT_MARKER.finditer(text):
        match = EVENT_MARKER.match(text, candidate.start())
        if match is None:
            warn("malformed event marker", f"ignoring malformed event marker {candidate.group(0)[:120]!r} "
                                           "(a service is ASCII letters, digits, _, -, ., @ and /)")
            continue
        level = normalise_level(match["level"])
        message = marker_text(text, match.end(), tags).strip()
        if level is None:
            warn("event marker level", f"ignoring event marker with unknown level {match['level']!r} "
                                       f"(use one of {', '.join(LEVELS)})")
            continue
        if not message:
            warn("event marker message", f"ignoring event marker with no message: {match.group(0).strip()[:80]!r}")
            continue
        if match["service"] and len(match["service"]) > MAX_SERVICE_CHARS:
            # Cut, two long names that begin alike would be taken for one service.
            warn("event marker service", f"ignoring event marker whose service is over {MAX_SERVICE_CHARS} "
                                         f"characters: {match.group(0)[:120]!r}")
            continue
        # One service whatever its case, as memories and cooldowns take it.
        service = match["service"].lower() if match["service"] else None
        markers.append(EventMarker(level, service, message[:MAX_MESSAGE_CHARS],
                                   len(message) if len(message) > MAX_MESSAGE_CHARS else None))
    return markers
