"""Text every backend can store: no NUL characters.

PostgreSQL refuses a NUL (U+0000) in any text value, where SQLite stores it;
a tool that prints binary output would otherwise fail a whole session on
PostgreSQL only. Every string sent to the database, written or searched for,
has its NUL characters replaced by U+FFFD (the replacement character), on
every backend, so both store and find the same thing, and what was replaced
stays visible. Bytes (binary columns) are left alone.

Half of a surrogate pair cannot be stored on any backend, nor replaced
without changing what was meant: ``is_unicode`` tells one, for the caller
to refuse the value in its own words.
"""
from __future__ import annotations

import logging
from itertools import repeat
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)

NUL = "\x00"
REPLACEMENT = "\ufffd"
# An execution option: the statement's text parameters were cleaned by
# ``texts_without_nul`` already (app/bulk_insert.py), column by column.
CHECKED = "claudeops_nul_checked"


@event.listens_for(Engine, "before_cursor_execute", retval=True)
def _replace_nul(_connection, _cursor, statement, parameters, context, _executemany):
    if context is not None and context.execution_options.get(CHECKED):
        return statement, parameters
    if not _holds_nul(parameters):   # nearly always: nothing to copy
        return statement, parameters
    cleaned, replaced = without_nul(parameters)
    _warn(replaced)
    return statement, cleaned


def _warn(replaced: int) -> None:
    if replaced:
        log.warning("replaced %d NUL character(s) in text sent to the database with U+FFFD "
                    "(PostgreSQL cannot store them)", replaced)


def texts_without_nul(values: list) -> list:
    """A column's values (strings or ``None``) with NUL characters replaced;
    the same list when there were none. One C-level pass over the column
    instead of a Python test per value: a stream's batch holds thousands of
    tool outputs."""
    try:
        clean = not any(map(str.__contains__, filter(None, values), repeat(NUL)))
    except TypeError:   # not only strings: value by value
        clean = not _holds_nul(values)
    if clean:
        return values
    cleaned, replaced = without_nul(values)
    _warn(replaced)
    return cleaned


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return NUL in value
    if isinstance(value, dict):
        return any(NUL in item if type(item) is str else _holds_nul(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(NUL in item if type(item) is str else _holds_nul(item) for item in value)
    return False


def without_nul(value: Any) -> tuple[Any, int]:
    """``value`` (a string, or the parameters of one statement or of many)
    with NUL characters replaced, and how many were; the same object when
    there were none."""
    if isinstance(value, str):
        count = value.count(NUL)
        return (value.replace(NUL, REPLACEMENT), count) if count else (value, 0)
    if isinstance(value, dict):
        items = {key: without_nul(item) for key, item in value.items()}
        count = sum(n for _, n in items.values())
        return ({key: item for key, (item, _) in items.items()}, count) if count else (value, 0)
    if isinstance(value, (list, tuple)):
        items = [without_nul(item) for item in value]
        count = sum(n for _, n in items)
        return (type(value)(item for item, _ in items), count) if count else (value, 0)
    return value, 0


def is_unicode(text: str) -> bool:
    """False for a lone surrogate: from a JSON escape ("\\udcff"), or from a
    command-line argument that was not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def without_lone_surrogates(text: str) -> str:
    """``text`` with each half of a surrogate pair as U+FFFD (a proper pair
    stays one character), as a database and a UTF-8 stream can take it."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
