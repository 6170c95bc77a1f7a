"""How a faulty plugin is logged: in full the first few times, not thousands.

A plugin that raises (or answers with the wrong type) for every text block,
every marker or every page view would otherwise write a traceback for each:
a busy session's stream holds thousands of markers, and the log the operator
needs fills with one bug. So each plugin, hook and kind of fault is logged
``BURST`` times a minute; the ones after that are counted, and the next one
logged after the minute says how many were left out.

The counts belong to the application (one per ``create_app``), so what one
service (or test) saw never silences another's.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Hashable, Optional

from flask import current_app, has_app_context

BURST = 3
INTERVAL_SECONDS = 60.0
# Kinds come from plugins (a figure's name, an exception's type): past this
# many keys, those whose minute is over are forgotten, so the counts stay small.
MAX_KEYS = 1_000
EXTENSION = "claudeops.plugin_faults"


@dataclass
class _Window:
    started: float
    logged: int = 1
    left_out: int = 0


class FaultCounts:
    """Which faults to log, each key (plugin, hook, kind) on its own."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._windows: dict[Hashable, _Window] = {}
        self._lock = threading.Lock()   # a scheduler thread and request threads log alike

    def admit(self, key: Hashable) -> Optional[tuple[int, bool]]:
        """None if this fault is only to be counted; else how many like it
        were left out since the last one logged, and whether it is the last
        one logged in its minute."""
        with self._lock:
            now = self._clock()
            window = self._windows.get(key)
            if window is None or now - window.started >= INTERVAL_SECONDS:
                if window is None and len(self._windows) >= MAX_KEYS:
                    self._forget_before(now - INTERVAL_SECONDS)
                self._windows[key] = _Window(now)
                return (window.left_out if window else 0), BURST == 1
            if window.logged < BURST:
                window.logged += 1
                return 0, window.logged == BURST
            window.left_out += 1
            return None

    def _forget_before(self, moment: float) -> None:
        """Forget every key whose minute began at ``moment`` or before (what
        they left out goes unsaid: better than counts that grow without end)."""
        self._windows = {key: window for key, window in self._windows.items() if window.started > moment}


def _counts() -> Optional[FaultCounts]:
    if not has_app_context():
        return None   # outside a running service (a start-up check): every fault is logged
    counts = current_app.extensions.get(EXTENSION)
    if counts is None:   # setdefault: of two threads that get here at once, both use the first one's
        counts = current_app.extensions.setdefault(EXTENSION, FaultCounts())
    return counts


def log_fault(logger: logging.Logger, plugin: str, hook: str, kind: str, message: str, *args,
              exc_info: bool = False, level: int = logging.WARNING) -> None:
    """``logger.log(level, message, *args)`` (``logger.exception`` with
    ``exc_info``) unless this plugin's ``kind`` of fault in ``hook`` has
    been logged ``BURST`` times in the last minute; ``kind`` tells apart the
    faults that are counted together (an exception's type, say)."""
    counts = _counts()
    admitted = counts.admit((plugin, hook, kind)) if counts is not None else (0, False)
    if admitted is None:
        return
    left_out, last_of_burst = admitted
    if left_out:
        message += f" ({left_out} more like it were counted, not logged, before this one)"
    if last_of_burst:
        message += " (more like it within a minute are counted, not logged)"
    if exc_info:
        logger.exception(message, *args)
    else:
        logger.log(level, message, *args)
