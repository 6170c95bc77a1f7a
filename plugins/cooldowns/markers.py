"""``[COOLDOWN:<action>:<service>] success|failure — <message>``: the agent's
report of how a restart or redeployment went.

The separator before the message may be an em or en dash, ``--``, ``-`` or
``:``, or nothing. The message ends at the end of the line or at the next
marker on it.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

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
# rather than silently dropped.
ANY_COOLDOWN_MARKER = re.compile(r"\[COOLDOWN:([^\]\n]*)\]")
COOLDOWN_MARKER = re.compile(
    r"\[COOLDOWN:(?P<action>[A-Za-z_-]+):(?P<service>[A-Za-z0-9_.@-]+)\][ \t]*"
    r"(?P<outcome>[A-Za-z]+)?[ \t]*(?:—|–|--|-|:)?[ \t]*"
    r"(?P<message>(?:(?!\[[A-Z]+[:\]])[^\n])*)")


@dataclass(frozen=True)
class CooldownMarker:
    action: str
    service: str
    outcome: str
    message: str


def parse_cooldown_markers(text: str) -> list[CooldownMarker]:
    """Every well-formed cooldown marker in ``text``, in order; the others are
    logged as warnings and skipped."""
    markers = []
    for candidate in ANY_COOLDOWN_MARKER.finditer(text):
        match = COOLDOWN_MARKER.match(text, candidate.start())
        if match is None:
            log.warning("ignoring malformed cooldown marker %r (the format is "
                        "[COOLDOWN:restart|redeployment:<service>] success|failure — <message>)",
                        candidate.group(0)[:120])
            continue
        action = normalise_action(match["action"])
        if action is None:
            log.warning("ignoring cooldown marker with unknown action %r (use one of %s)",
                        match["action"], ", ".join(ACTIONS))
            continue
        outcome = OUTCOME_ALIASES.get((match["outcome"] or "").lower())
        if outcome is None:
            log.warning("ignoring cooldown marker %r without success or failure", candidate.group(0)[:120])
            continue
        service = normalise_service(match["service"])
        if service is None:
            log.warning("ignoring cooldown marker with an invalid service %r", match["service"])
            continue
        markers.append(CooldownMarker(action, service, outcome, match["message"].strip()[:MAX_MESSAGE_CHARS]))
    return markers
