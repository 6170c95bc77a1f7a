"""``[MEMORY:<category>] observation`` and ``[MEMORY:<category>:<service>] observation``;
``[OUTCOME:<level>:m<id>] note``, what a memory the session was given did for it."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Optional

from plugins.memory.models import CATEGORIES, GENERAL, MAX_SERVICE_CHARS, OUTCOME_LEVELS

log = logging.getLogger(__name__)

# SPEC-0015's regex, to the letter: group 1 category, 2 service, 3 observation.
MEMORY_MARKER = re.compile(
    r"\[MEMORY:(timing|dependency|behavior|remediation|maintenance)(?::([a-zA-Z0-9_-]+))?\]\s*(.+)")

# What every memory and outcome marker begins with (the
# ``claudeops_marker_tags`` hook).
MARKER_TAGS = ("[MEMORY:", "[OUTCOME:")

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
            service = match.group(2)
            if service is not None and len(service) > MAX_SERVICE_CHARS:
                log.warning("ignoring memory marker whose service is over %d characters: %r",
                            MAX_SERVICE_CHARS, candidate.group(0)[:120])
                continue
            if service is not None and service.lower() == GENERAL:
                service = None   # the memory section's own name for memories of no one service
            markers.append(MemoryMarker(match.group(1), service, observation))
    return markers


# The id as the memory section prints it (m12); a bare 12 is taken too. Ten
# digits at most: anything longer names no memory and would only be a big number.
OUTCOME_MARKER = re.compile(rf"\[OUTCOME:({'|'.join(OUTCOME_LEVELS)}):[mM]?([0-9]{{1,10}})\][ \t]*([^\n]*)")
ANY_OUTCOME_MARKER = re.compile(r"\[OUTCOME:([^\]\n]*)\]")


@dataclass(frozen=True)
class OutcomeMarker:
    level: str
    memory_id: int
    note: str            # may be empty


@dataclass(frozen=True)
class MalformedOutcome:
    """Shaped like an outcome marker but not one: reported, never scored."""
    text: str
    why: str


def parse_outcome_markers(text: str) -> list[OutcomeMarker | MalformedOutcome]:
    """Every outcome marker in ``text``, in order; one that cannot be read is
    returned as ``MalformedOutcome`` so that the session's activity log says so."""
    found: list[OutcomeMarker | MalformedOutcome] = []
    for candidate in ANY_OUTCOME_MARKER.finditer(text):
        match = OUTCOME_MARKER.match(text, candidate.start())
        if match is None:
            level = candidate.group(1).split(":")[0]
            why = (f"unknown outcome {level[:40]!r} (use {', '.join(OUTCOME_LEVELS)})" if level not in OUTCOME_LEVELS
                   else "no memory id (write it as the memory section shows it, e.g. m12)")
            log.warning("ignoring outcome marker %r: %s", candidate.group(0)[:120], why)
            found.append(MalformedOutcome(candidate.group(0)[:120], why))
            continue
        note = NEXT_MARKER.split(match.group(3), maxsplit=1)[0].strip()
        found.append(OutcomeMarker(match.group(1), int(match.group(2)), note))
    return found
