"""``[INCIDENT:<severity>:<service>] summary`` and ``[INCIDENT:resolved:<service>] summary``.

A marker may stand anywhere in a line; its summary runs to the end of the line
or to the next marker of an installed plugin on that line, whichever comes
first (the same rule as the built-in event markers: ``marker_text``).
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Iterable

from app.plugin_types import BUILT_IN_TAGS, marker_text

log = logging.getLogger(__name__)

SEVERITIES = ("minor", "major", "critical")
RESOLVED = "resolved"

MAX_SUMMARY_CHARS = 2000
MAX_SERVICE_CHARS = 100

# Every incident marker begins with it (the ``claudeops_marker_tags`` hook).
MARKER_TAG = "[INCIDENT:"
# The service is required: an incident is always about something.
# The summary is read from the marker's end (marker_text).
INCIDENT_MARKER = re.compile(r"\[INCIDENT:(?P<action>[A-Za-z]+):(?P<service>[A-Za-z0-9_.\-/]+)\][ \t]*")


@dataclass(frozen=True)
class IncidentMarker:
    action: str        # a severity (minor, major, critical) or "resolved"
    service: str
    summary: str

    @property
    def resolves(self) -> bool:
        return self.action == RESOLVED


def parse_incident_markers(text: str, tags: Iterable[str] = BUILT_IN_TAGS) -> list[IncidentMarker]:
    """Every well-formed incident marker in ``text``, in order, a summary
    ending at the next of ``tags`` (``run.marker_tags``: every installed
    plugin's) on its line. One with an unknown severity, or one that opens
    an incident without a summary, is logged and skipped."""
    tags = (*tags, MARKER_TAG)   # its own too, whoever calls: a line of many markers is read in one pass
    markers = []
    for match in INCIDENT_MARKER.finditer(text):
        action = match["action"].lower()
        summary = marker_text(text, match.end(), tags).strip()[:MAX_SUMMARY_CHARS]
        if action not in SEVERITIES and action != RESOLVED:
            log.warning("ignoring incident marker with unknown severity %r (use %s, or %s to close it)",
                        match["action"], ", ".join(SEVERITIES), RESOLVED)
            continue
        if action != RESOLVED and not summary:
            log.warning("ignoring incident marker with no summary: %r", match.group(0).strip()[:80])
            continue
        markers.append(IncidentMarker(action, match["service"][:MAX_SERVICE_CHARS], summary))
    return markers
