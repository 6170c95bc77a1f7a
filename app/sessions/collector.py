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
"""
from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_streams = 0   # streams being read now: only the last one to end hands the objects back


@contextmanager
def earlier_objects_set_apart() -> Iterator[None]:
    global _streams
    with _lock:
        _streams += 1
        gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _streams -= 1
            if _streams == 0:
                gc.unfreeze()
