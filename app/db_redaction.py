"""Every text the ORM writes to the database passes the redactor first.

One ``before_flush`` listener on the session covers every table, the host's
and every plugin's (a third party's included), whoever writes the row: the
stream handler, a marker hook, the operator through the API, the dashboard
or the CLI, or the cooldown hook's own process. Dashboard pages, the API and
the next session's system prompt read what is stored, so none of them can
show a secret the redactor knows.

Only new rows and changed values are looked at. Core ``insert()`` and
``update()`` statements, and the ORM's bulk inserts, bypass the flush, and
so this listener: the service uses them only for status flags and fixed
texts, and for rows that pass ``redacted_values`` first.
"""
from __future__ import annotations

from typing import Optional

from flask import current_app, has_app_context
from sqlalchemy import String, event, inspect

from app.extensions import db

_text_columns: dict = {}


def install() -> None:
    """Listen once per process; the listener finds each app's redactor."""
    if not event.contains(db.session, "before_flush", _redact_pending):
        event.listen(db.session, "before_flush", _redact_pending)


def _redact_pending(session, flush_context, instances) -> None:
    if not has_app_context():
        return
    redactor = current_app.extensions.get("claudeops.redactor")
    if redactor is None:
        return
    new = session.new
    for obj in list(new) + list(session.dirty):
        state = inspect(obj)
        for key in _text_keys(state.mapper):
            if obj in new:
                value = state.dict.get(key)
            else:
                added = state.attrs[key].history.added
                value = added[0] if added else None
            if isinstance(value, str) and value:
                cleaned = redactor.redact(value)
                if cleaned != value:
                    setattr(obj, key, cleaned)


def redacted_values(model, values: dict, seen: Optional[dict[str, str]] = None) -> dict:
    """A row for a bulk insert of ``model`` with its text values redacted,
    as a flush would have written them. ``seen``, kept by the caller across
    rows, redacts a text that recurs (an action's name, a detail) once."""
    redactor = current_app.extensions.get("claudeops.redactor") if has_app_context() else None
    if redactor is None:
        return values
    for key in _text_keys(inspect(model)):
        value = values.get(key)
        if isinstance(value, str) and value:
            if seen is None:
                values[key] = redactor.redact(value)
            else:
                cleaned = seen.get(value)
                values[key] = cleaned if cleaned is not None else seen.setdefault(value, redactor.redact(value))
    return values


def _text_keys(mapper) -> tuple[str, ...]:
    keys = _text_columns.get(mapper)
    if keys is None:
        keys = tuple(attr.key for attr in mapper.column_attrs
                     if len(attr.columns) == 1 and isinstance(attr.columns[0].type, String))
        _text_columns[mapper] = keys
    return keys
