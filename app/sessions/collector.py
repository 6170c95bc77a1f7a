"""Python's cyclic garbage collector, kept to a session's own objects while
its stream is read.

Reading a busy stream allocates millions of objects (rows, records, ORM
state), and every so often that makes the collector go through every
object the process tracks: the application, its plugins, SQLAlchemy's
metadata and caches, the memory matcher's cache. In a long-lived scheduler
that full pass is most of what a collection costs, and it finds nothing to
free there. While a stream is read, what the process held before it began
is set apart (``gc.freeze``, which moves it in one step), so a full pass
goes through what the session made; at the end it is handed back
(``gc.unfreeze``), and garbage it held is collected as usual after that.

Meanwhile the youngest generation is collected after ``YOUNG_THRESHOLD``
new objects rather than Python's 700: nearly all of a stream's objects are
freed by their reference counts within a line or a batch, and a collection
every 700 allocations went through them hundreds of times a second for
nothing: 7% of the pipeline's instructions (counted by callgrind) over the
first 10,000 lines of bench/ingest.py's recorded stream. The threshold
Python had is restored at the end.
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

YOUNG_THRESHOLD = 10_000

_lock = threading.Lock()
_streams = 0   # streams being read now: only the last one to end hands the objects back
_thresholds: Optional[tuple[int, int, int]] = None   # as they were before the first of them


@contextmanager
def earlier_objects_set_apart() -> Iterator[None]:
    global _streams, _thresholds
    with _lock:
        if _streams == 0:
            _thresholds = gc.get_threshold()
            young, *older = _thresholds
            # Not where the collector is off (0) or already rarer.
            if young and young < YOUNG_THRESHOLD:
                gc.set_threshold(YOUNG_THRESHOLD, *older)
        _streams += 1
        gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _streams -= 1
            if _streams == 0:
                gc.unfreeze()
                gc.set_threshold(*_thresholds)
