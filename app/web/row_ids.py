"""Row ids in URLs: ``<int:...>`` in every rule, the plugins' too.

Ids are INTEGER columns: 32 bits on PostgreSQL, where a larger number in a
query is an error ("integer out of range") rather than a row that is not
there. A number beyond 2**31 - 1 names no row on any backend, so it is a
404 before it reaches the database, the same on SQLite and PostgreSQL.
"""
from __future__ import annotations

from werkzeug.exceptions import NotFound
from werkzeug.routing import IntegerConverter

MAX_ROW_ID = 2**31 - 1


class RowIdConverter(IntegerConverter):
    # ASCII digits, without leading zeros: werkzeug's \d also takes other
    # scripts' digits (/memories/１, fullwidth), and int() takes /memories/007:
    # one row would be reached by many spellings of its URL.
    regex = r"0|[1-9][0-9]*"

    def to_python(self, value: str) -> int:
        # Longer than the largest id, it is larger: int() refuses a number of
        # over 4,300 digits, which werkzeug takes for a path no rule matches.
        number = super().to_python(value) if len(value) <= len(str(MAX_ROW_ID)) else None
        if number is None or number > MAX_ROW_ID:
            # NotFound, not werkzeug's ValidationError: after that, werkzeug
            # answers 405 when the path has rules for other methods.
            raise NotFound(f"nothing has the id {value}; ids end at {MAX_ROW_ID}")
        return number


def bounded_row_id(value: int) -> int:
    """An id to compare rows with (``id > after``): no row lies beyond the
    largest or before the first (ids start at 1), so the comparison means the
    same there, on every backend."""
    return max(0, min(value, MAX_ROW_ID))
