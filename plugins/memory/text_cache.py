"""A least-recently-used cache of what is worked out of a text, bounded by
the characters of the texts it keeps rather than by their number.

The matcher's caches (``matcher.features``, ``store.same_words``) hold
stored observations, which the operator allows up to 2,000 characters
(CLAUDEOPS_MEMORY_MAX_OBSERVATION_CHARS). Bounded by their number (16,384
entries), they held some 30 MB of 70-character observations and would hold
570 MB of 2,000-character ones, for the life of the scheduler. What a text's entry costs grows
with its length (its words, and the text itself), so a bound on the
characters bounds the memory, whatever the observations' length.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, TypeVar

T = TypeVar("T")

# What an entry costs beyond its text, counted in characters. Measured by
# tracemalloc over matcher.features and store.same_words together, an
# observation's entries take about 1 KB and 17 bytes a character: its words
# are each a string of their own, in sets.
ENTRY_CHARS = 60
# The bound of each of the matcher's caches: 15,000 observations of 70
# characters (the 50 candidates of 300 services and categories), 1,000 of
# 2,000; some 30 MB for both, whatever their length.
MATCHER_CACHE_CHARS = 2_000_000


class TextCache(Generic[T]):
    """``work_out(text)``, kept for the texts most recently asked about, as
    long as their characters (each counted with ENTRY_CHARS more) come to
    at most ``max_chars``."""

    def __init__(self, work_out: Callable[[str], T], max_chars: int):
        self.work_out = work_out
        self.max_chars = max_chars
        self._entries: OrderedDict[str, T] = OrderedDict()
        self._chars = 0
        # The scheduler's session and a dashboard request may both compare.
        self._lock = threading.Lock()

    def __call__(self, text: str) -> T:
        with self._lock:
            if text in self._entries:
                self._entries.move_to_end(text)
                return self._entries[text]
        value = self.work_out(text)   # outside the lock: the work is the slow part
        cost = len(text) + ENTRY_CHARS
        if cost > self.max_chars:
            return value
        with self._lock:
            if text not in self._entries:
                self._entries[text] = value
                self._chars += cost
                while self._chars > self.max_chars:
                    evicted, _ = self._entries.popitem(last=False)
                    self._chars -= len(evicted) + ENTRY_CHARS
        return value

    @property
    def chars(self) -> int:
        """What the entries kept count for: their texts' characters, and ENTRY_CHARS each."""
        return self._chars

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0
