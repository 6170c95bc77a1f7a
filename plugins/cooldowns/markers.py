"""``[COOLDOWN:<action>:<service>] success|failure — <message>``: the agent's
report of how a restart or redeployment went.

The separator before the message may be an em or en dash, ``--``, ``-`` or
``:``, or nothing. The message ends at the end of the line or at the next
marker of an installed plugin on it (``app.marker_text``).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

from app.marker_text import BUILT_IN_TAGS, marker_text
from app.session_warnings import Warn, log_warning
from plugins.cooldowns.commands import normalise_service
from plugins.cooldowns.limits import ACTIONS, normalise_action
from plugins.cooldowns.models import FAILURE, SUCCESS

log = logging.getLogger(__name__)

OUTCOME_ALIASES = {
    "success": SUCCESS, "succeeded": SUCCESS, "successful": SUCCESS, "ok": SUCCESS, "done": SUCCESS,
    "failure": FAILURE, "failed": FAILURE, "fail": FAILURE, "error": FAILURE,
}
MAX_MESSAGE_CHARS = 2000

# What every cooldown report begins with (the ``claudeops_marker_tags`` hook).
MARKER_TAGS = ("[COOLDOWN:",)
# Anything shaped like a cooldown marker, so that a malformed one is reported
# rather than silently dropped; it ends at anything shaped like the start of
# a marker, so that one left without its "]" does not take in the next one.
ANY_COOLDOWN_MARKER = re.compile(r"\[COOLDOWN:((?:(?!\[[A-Z]+:)[^\]\n])*)\]")
# The marker up to its message, which is read from its end (marker_text).
COOLDOWN_MARKER = re.compile(
    r"\[COOLDOWN:(?P<action>[A-Za-z_-]+):(?P<service>[A-Za-z0-9_.@-]+)\][ \t]*"
    r"(?P<outcome>[A-Za-z]+)?[ \t]*(?:—|–|--|-|:)?[ \t]*")


@dataclass(frozen=True)
class CooldownMarker:
    action: str
    service: str
    outcome: str
    message: str
    # The length of the message the agent wrote, when it was cut to MAX_MESSAGE_CHARS.
    cut_from: Optional[int] = field(default=None, compare=False)


def parse_cooldown_markers(text: str, warn: Optional[Warn] = None,
                           tags: Iterable[str] = BUILT_IN_TAGS) -> list[CooldownMarker]:
    """Every well-formed cooldown marker in ``text``, in order, a message
    ending at the next of ``tags`` (``run.marker_tags``) on its line; the
    others are skipped and told to ``warn`` (the log by default)."""
    warn = warn or log_warning(log)
    tags = (*tags, *MARKER_TAGS)   # its own too, whoever calls: a line of markers stays linear
    markers = []
    for candidate in ANY_COOLDOWN_MARKER.finditer(text):
        match = COOLDOWN_MARKER.match(text, candidate.start())
        if match is None:
            warn("malformed cooldown marker", f"ignoring malformed cooldown marker {candidate.group(0)[:120]!r} "
                 "(the format is [COOLDOWN:restart|redeployment:<service>] success|failure — <message>)")
            continue
        action = normalise_action(match["action"])
        if action is None:
            warn("cooldown marker action", f"ignoring cooldown marker with unknown action {match['action']!r} "
                                           f"(use one of {', '.join(ACTIONS)})")
            continue
        outcome = OUTCOME_ALIASES.get((match["outcome"] or "").lower())
        if outcome is None:
            warn("cooldown marker outcome",
                 f"ignoring cooldown marker {candidate.group(0)[:120]!r} without success or failure")
            continue
        service = normalise_service(match["service"])
        if service is None:
            warn("cooldown marker service", f"ignoring cooldown marker with an invalid service {match['service']!r}")
            continue
        message = marker_text(text, match.end(), tags).strip()
        markers.append(CooldownMarker(action, service, outcome, message[:MAX_MESSAGE_CHARS],
                                      len(message) if len(message) > MAX_MESSAGE_CHARS else None))
    return markers
