"""ClockWatch: the wall clock set back, told apart from drift, a slow look
and a clock that moved ahead (a suspend)."""
from __future__ import annotations

from datetime import timedelta

from app.sessions.clock_watch import ClockWatch


class Clocks:
    def __init__(self):
        self.wall, self.monotonic = 1_000_000.0, 50.0

    def tick(self, seconds: float, wall_moved_by: float = 0.0) -> None:
        self.monotonic += seconds
        self.wall += seconds + wall_moved_by


def watched():
    clocks, told = Clocks(), []
    watch = ClockWatch(told.append, wall=lambda: clocks.wall, monotonic=lambda: clocks.monotonic)
    return clocks, watch, told


def test_a_clock_set_back_is_told_by_how_much():
    clocks, watch, told = watched()
    clocks.tick(1)
    watch.look()
    clocks.tick(1, wall_moved_by=-3600)
    watch.look()
    clocks.tick(1)
    watch.look()
    assert told == [timedelta(hours=1)]


def test_drift_a_late_look_and_a_clock_moved_ahead_are_not():
    clocks, watch, told = watched()
    for seconds, moved in ((1, -0.5), (40, 0), (1, 1800), (1, -1.9)):
        clocks.tick(seconds, wall_moved_by=moved)
        watch.look()
    assert told == []


def test_a_setting_back_spread_over_several_looks_is_told_when_it_adds_up_only_per_look():
    """Each look compares with the last: NTP slewing a few ms a second never adds up to a setting."""
    clocks, watch, told = watched()
    for _ in range(100):
        clocks.tick(1, wall_moved_by=-0.01)
        watch.look()
    assert told == []
