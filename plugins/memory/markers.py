"""``[MEMORY:<category>] observation`` and ``[MEMORY:<category>:<service>] observation``."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Optional

from plugins.memory.models import CATEGORIES

log = logging.getLogger(__name__)

# SPEC-0015's regex, to the letter: group 1 category, 2 service, 3 observation.
MEMORY_MARKER = re.compile(
    r"\[MEMORY:(timing|dependency|behavior|remediation|maintenance)(?::([a-zA-Z0-9_-]+))?\]\s*(.+)")

# Anything shaped like a memory marker, so one with an unknown category is
# reported instead of silently dropped.
ANY_MEMORY_MARKER = re.compile(r"\[MEMORY:([^\]\n]*)\]")

# The observation ends at the end of its line or at the next marker on it.
NEXT_MARKER = re.compile(r"\s*\[[A-Z]+:")


@dataclass(frozen=True)
class MemoryMarker:
    category: str
    service: Optional[str]
    observation: str


def parse_memory_markers(text: str) -> list[MemoryMarker]:
    markers = []
    for line in text.splitlines():
        for candidate in ANY_MEMORY_MARKER.finditer(line):
            match = MEMORY_MARKER.match(line, candidate.start())
            if match is None:
                category = candidate.group(1).split(":")[0]
                if category not in CATEGORIES:
                    log.warning("ignoring memory marker with invalid category %r (valid: %s)",
                                category, ", ".join(CATEGORIES))
                else:
                    log.warning("ignoring malformed memory marker %r (a service is letters, digits, _ and -)",
                                candidate.group(0)[:120])
                continue
            observation = NEXT_MARKER.split(match.group(3), maxsplit=1)[0].strip()
            if not observation:
                log.warning("ignoring memory marker with no observation: %r", candidate.group(0))
                continue
            markers.append(MemoryMarker(match.group(1), match.group(2), observation))
    return markers
