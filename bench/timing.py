"""Medians of repeated runs, the two sides of a comparison interleaved.

The machine may be shared: alternating small and large (A B A B …) makes a
burst of load from elsewhere fall on both sides, and the median ignores the
odd slow run.
"""
from __future__ import annotations

import gc
import statistics
import time
from typing import Callable, Optional


def _timed(fn: Callable[[], object], prepare: Optional[Callable[[], object]]) -> float:
    if prepare is not None:
        prepare()
    gc.collect()   # a collection owed by earlier work is not this run's cost
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(small: Callable[[], object], large: Callable[[], object], repeat: int, warmup: int = 1,
            prepare_small: Optional[Callable[[], object]] = None,
            prepare_large: Optional[Callable[[], object]] = None) -> tuple[float, float]:
    """Median seconds of ``small`` and of ``large``, run alternately
    ``repeat`` times each after ``warmup`` untimed runs (caches, statement
    compilation). ``prepare_*`` run before each call, untimed."""
    for _ in range(warmup):
        _timed(small, prepare_small)
        _timed(large, prepare_large)
    small_times, large_times = [], []
    for _ in range(repeat):
        small_times.append(_timed(small, prepare_small))
        large_times.append(_timed(large, prepare_large))
    return statistics.median(small_times), statistics.median(large_times)
