"""A client's value as a message repeats it: recognisable, and bounded."""
from __future__ import annotations

from typing import Any

# The most characters of a client's value a message repeats: enough to know
# it by. Repeated whole, a runaway one (a log pasted into a field, a query
# value of a megabyte) would make the answer, and the log line, as long as
# the request.
ECHOED_CHARS = 80


def echoed(value: Any, quote: bool = True) -> str:
    """A client's value as a message repeats it: as ``repr()`` writes it
    (text unquoted, with ``quote`` false). Text longer than ``ECHOED_CHARS``
    is cut there, with "…" and its length: ``'aaaa…' (1,048,576
    characters)``; anything else (a JSON list, say) as ``repr()`` writes it,
    cut there with "…"."""
    if not isinstance(value, str):
        written = repr(value)
        return written if len(written) <= ECHOED_CHARS else written[:ECHOED_CHARS] + "…"
    if len(value) <= ECHOED_CHARS:
        return repr(value) if quote else value
    cut = value[:ECHOED_CHARS] + "…"
    return f"{repr(cut) if quote else cut} ({len(value):,} characters)"
