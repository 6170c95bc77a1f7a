"""``[MEMORY:<category>] observation`` and ``[MEMORY:<category>:<service>] observation``;
``[OUTCOME:<level>:m<id>] note``, what a memory the session was given did for it."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Iterable, Optional

from app.marker_text import BUILT_IN_TAGS, marker_text
from app.session_warnings import Warn, log_warning, named_kind
from plugins.memory.models import CATEGORIES, GENERAL, MAX_SERVICE_CHARS, OUTCOME_LEVELS, memory_spelling

log = logging.getLogger(__name__)

# SPEC-0015's regex, to the letter: group 1 category, 2 service, 3 observation.
MEMORY_MARKER = re.compile(
    r"\[MEMORY:(timing|dependency|behavior|remediation|maintenance)(?::([a-zA-Z0-9_-]+))?\]\s*(.+)")

# What every memory and outcome marker begins with (the
# ``claudeops_marker_tags`` hook).
MARKER_TAGS = ("[MEMORY:", "[OUTCOME:")

# Anything shaped like a memory marker, so one with an unknown category is
# reported instead of silently dropped. It ends at anything shaped like the
# start of a marker: one left without its "]" must not take in the next one.
ANY_MEMORY_MARKER = re.compile(r"\[MEMORY:((?:(?!\[[A-Z]+:)[^\]\n])*)\]")

# SPEC-0015's regex without its observation, which is read from the end of
# this up to the next marker of an installed plugin on its line only
# (app.marker_text): the whole rest of the line, read again for every marker
# on it, made a long line of markers cost its square.
MEMORY_HEADER = re.compile(MEMORY_MARKER.pattern.removesuffix(r"\s*(.+)"))


@dataclass(frozen=True)
class MemoryMarker:
    category: str
    service: Optional[str]
    observation: str


def parse_memory_markers(text: str, warn: Optional[Warn] = None,
                         tags: Iterable[str] = BUILT_IN_TAGS) -> list[MemoryMarker]:
    """Every well-formed memory marker in ``text``, in order, an observation
    ending at the next of ``tags`` (``run.marker_tags``) on its line; the
    others are skipped and told to ``warn`` (the log by default)."""
    warn = warn or log_warning(log)
    tags = (*tags, *MARKER_TAGS)   # its own too, whoever calls: a line of markers stays linear
    markers = []
    for line in text.splitlines():
        for candidate in ANY_MEMORY_MARKER.finditer(line):
            match = MEMORY_HEADER.match(line, candidate.start(), candidate.end())
            if match is None:
                warn(*_why_not_read(candidate))
                continue
            observation = marker_text(line, match.end(), tags).strip()
            if not observation:
                warn("memory marker observation",
                     f"ignoring memory marker with no observation: {candidate.group(0)[:120]!r}")
                continue
            service = match.group(2)
            if service is not None and len(service) > MAX_SERVICE_CHARS:
                warn("memory marker service", f"ignoring memory marker whose service is over {MAX_SERVICE_CHARS} "
                                              f"characters: {candidate.group(0)[:120]!r}")
                continue
            if service is not None:
                # One service whatever its case ("Jellyfin" in prose, "jellyfin" as the
                # container is named), as the cooldowns plugin takes it too.
                service = service.lower()
            if service == GENERAL:
                service = None   # the memory section's own name for memories of no one service
            markers.append(MemoryMarker(match.group(1), service, observation))
    return markers


def _why_not_read(candidate: re.Match) -> tuple[str, str]:
    """What is wrong with a memory marker SPEC-0015's regex does not read,
    as a warning's kind and message."""
    category, _, service = candidate.group(1).partition(":")
    if category not in CATEGORIES and category.lower() in CATEGORIES:   # the spec takes it as it lists it
        return ("memory marker category",
                f"ignoring memory marker with category {category[:40]!r}: write it in lower case, "
                f"{category.lower()!r}")
    if category not in CATEGORIES:   # each category written logged once a session, as the spec wants each logged
        return (named_kind("memory marker category", category[:40]),
                f"ignoring memory marker with invalid category {category[:40]!r} (valid: {', '.join(CATEGORIES)})")
    if not service:
        return ("malformed memory marker",
                f"ignoring memory marker with an empty service: {candidate.group(0)[:120]!r} (a general memory "
                f"has none: [MEMORY:{category}])")
    # A unit (getty@tty1) or a host (db.lan), as events and cooldowns take them: say how to write it.
    written = memory_spelling(service)
    advice = f", such as {written!r}" if written else ""
    return ("malformed memory marker",
            f"ignoring memory marker for service {service[:120]!r}: a memory's service is ASCII letters, digits, "
            f"_ and -{advice}")


# The id as the memory section prints it (m12); a bare 12 is taken too. Ten
# digits at most: anything longer names no memory and would only be a big number.
# The level in any case, as event levels are read ("Worked" is worked).
# Leading zeros name the same memory (m012 is m12).
OUTCOME_MARKER = re.compile(rf"\[OUTCOME:((?ai:{'|'.join(OUTCOME_LEVELS)})):[mM]?0*([0-9]{{1,10}})\]")
OUTCOME_TAG = re.compile(re.escape("[OUTCOME:"))
ANY_OUTCOME_MARKER = re.compile(r"\[OUTCOME:((?:(?!\[[A-Z]+:)[^\]\n])*)\]")


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


def parse_outcome_markers(text: str, warn: Optional[Warn] = None,
                          tags: Iterable[str] = BUILT_IN_TAGS) -> list[OutcomeMarker | MalformedOutcome]:
    """Every outcome marker in ``text``, in order, a note ending at the next
    of ``tags`` on its line; one that cannot be read is returned as
    ``MalformedOutcome`` so that the session's activity log says so, and
    told to ``warn`` (the log by default)."""
    warn = warn or log_warning(log)
    tags = (*tags, *MARKER_TAGS)   # its own too, whoever calls: a line of markers stays linear
    found: list[OutcomeMarker | MalformedOutcome] = []
    for candidate in ANY_OUTCOME_MARKER.finditer(text):
        match = OUTCOME_MARKER.match(text, candidate.start())
        if match is None:
            why = _why_outcome_unread(candidate.group(1))
            warn("malformed outcome marker", f"ignoring outcome marker {candidate.group(0)[:120]!r}: {why}")
            found.append(MalformedOutcome(candidate.group(0)[:120], why))
            continue
        note = marker_text(text, match.end(), tags).strip()
        found.append(OutcomeMarker(match.group(1).lower(), int(match.group(2)), note))
    return found


# An id too long to be one (OUTCOME_MARKER takes ten digits at most).
LONG_ID = re.compile(r"[mM]?0*[0-9]{11,}")


def _why_outcome_unread(fields: str) -> str:
    """What is wrong with an outcome marker OUTCOME_MARKER does not read."""
    level, _, memory_id = fields.partition(":")
    if not level.isascii() or level.lower() not in OUTCOME_LEVELS:
        return f"unknown outcome {level[:40]!r} (use {', '.join(OUTCOME_LEVELS)})"
    if LONG_ID.fullmatch(memory_id):
        return f"memory id {memory_id[:40]!r} names no memory (ten digits at most, as the memory section shows it)"
    return "no memory id (write it as the memory section shows it, e.g. m12)"

