"""Notice the wall clock being set back while the scheduler runs.

APScheduler keeps its jobs' next run times in wall-clock time. Set the clock
back an hour (NTP correcting a clock that was ahead, an operator's `date -s`)
and every job waits an hour longer than it should: the next scheduled
session, and the heartbeat, without which the dashboard says the scheduler
is not running. The monotonic clock is never set: the wall clock falling
behind it between two looks is the clock having been set back, by as much.

A wall clock that moves ahead of the monotonic one is not corrected: after a
suspend it is right (the monotonic clock stood still meanwhile), and the jobs
that fell due in the meantime are due.
"""
from __future__ import annotations

import time
from datetime import timedelta
from typing import Callable

# Less than this is drift, or a look delayed by a loaded machine; a setting
# of the clock is most often minutes or hours.
SET_BACK_SECONDS = 2.0


class ClockWatch:
    def __init__(self, set_back: Callable[[timedelta], None], wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic):
        """``set_back(by)`` is called from ``look`` when the wall clock was set back ``by``."""
        self._set_back, self._wall, self._monotonic = set_back, wall, monotonic
        self._last = (wall(), monotonic())

    def look(self) -> None:
        wall, monotonic = self._wall(), self._monotonic()
        last_wall, last_monotonic = self._last
        self._last = (wall, monotonic)
        behind = (monotonic - last_monotonic) - (wall - last_wall)
        if behind >= SET_BACK_SECONDS:
            self._set_back(timedelta(seconds=behind))
