"""The session's response: all of the agent's text blocks, joined, up to a
limit. Past it the earliest text gives way, so a session's memory stays flat
however long it runs; the end, where the agent concludes, is what is kept
(and the run log keeps every byte)."""
from __future__ import annotations

from collections import deque

SEPARATOR = "\n\n"


class ResponseTail:
    def __init__(self, limit: int):
        self.limit = limit
        self.blocks: deque[str] = deque()
        self.kept = 0      # characters of the kept blocks, separators included
        self.total = 0     # characters of the whole response so far

    def append(self, text: str) -> None:
        added = len(text) + (len(SEPARATOR) if self.total else 0)
        self.total += added
        self.blocks.append(text)
        self.kept += added if len(self.blocks) > 1 else len(text)
        while self.kept > self.limit and len(self.blocks) > 1:
            self.kept -= len(self.blocks.popleft()) + len(SEPARATOR)

    def copy(self) -> "ResponseTail":
        other = ResponseTail(self.limit)
        other.blocks, other.kept, other.total = self.blocks.copy(), self.kept, self.total
        return other

    def text(self) -> str:
        joined = SEPARATOR.join(self.blocks)
        if len(joined) > self.limit:   # one block longer than the limit on its own
            joined = joined[-self.limit:]
        omitted = self.total - len(joined)
        if omitted:
            return f"… ({omitted:,} earlier characters are in the run log)\n\n{joined}"
        return joined
