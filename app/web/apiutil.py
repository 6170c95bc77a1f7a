"""Helpers for JSON API endpoints, the host's and plugins' alike."""
from __future__ import annotations

import json
from typing import Any, Iterable, Optional
from urllib.parse import unquote_plus

from flask import jsonify, request

from app import strict_json
from app.echoed import echoed
from app.listing import Total
from app.plain_numbers import BEYOND_EVERY_BOUND, is_whole_number, whole_number
from app.portable_text import is_unicode
from app.web.row_ids import MAX_ROW_ID

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
# The largest row id: ids are INTEGER columns, 32 bits on PostgreSQL, so a
# larger number names no row on any backend (see app/web/row_ids.py).
MAX_ID = MAX_ROW_ID
# Far beyond any table this service keeps, and within every driver's range.
MAX_OFFSET = 2**31 - 1
NUL = "\x00"


class ApiError(Exception):
    """Raise from an API view to answer ``{"error": message}`` with ``status``."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


def json_error(message: str, status: int):
    response = jsonify({"error": message})
    response.status_code = status
    return response


def int_arg(name: str, default: int | None = None, minimum: int | None = None,
            maximum: int | None = None) -> int | None:
    """A whole-number query argument, or a 400 that says what is wrong."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return default
    # ASCII digits and a minus, as the OpenAPI document says (plain_numbers); no "+", which a
    # query string would carry as a space unless escaped.
    if raw.startswith("+") or not is_whole_number(raw):
        raise ApiError(f"{name} must be a whole number, not {echoed(raw)}")
    value = whole_number(raw)
    if abs(value) == BEYOND_EVERY_BOUND and (minimum if value < 0 else maximum) is None:
        raise ApiError(f"{name} has more digits than any number it takes")
    if minimum is not None and value < minimum:
        raise ApiError(f"{name} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ApiError(f"{name} must be at most {maximum}")
    return value


def pagination() -> tuple[int, int]:
    """``limit`` (1..500, default 50) and ``offset`` (0..MAX_OFFSET)."""
    return (int_arg("limit", DEFAULT_LIMIT, 1, MAX_LIMIT), int_arg("offset", 0, 0, MAX_OFFSET))


def json_body() -> dict[str, Any]:
    """The request's JSON object, or 415 (not JSON) / 400 (not valid JSON,
    not an object, or holding text no database stores: ``unstorable_text``)."""
    if not request.is_json:
        raise ApiError("send a JSON body with Content-Type: application/json", 415)
    data = request.get_data(cache=True)
    if not data.strip():
        raise ApiError("the body is empty: send a JSON object")
    try:
        body = strict_json.loads(data)
    except strict_json.DuplicateKey as exc:
        raise ApiError(f"the body is refused: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:   # not JSON (the parser says where), or not UTF-8
        raise ApiError(f"the body is not valid JSON: {exc}") from None
    except ValueError:   # valid JSON, but Python reads no integer of more than 4,300 digits
        raise ApiError("the body holds a number of more than 4,300 digits, beyond any field's bounds") from None
    except RecursionError:   # the parser gives up on very deep nesting
        raise ApiError("the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError(f"the body must be a JSON object, not {json_kind(body)}")
    problem = unstorable_text(body)
    if problem:
        raise ApiError(problem)
    return body


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, in JSON's words, for a message."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    return "a boolean" if isinstance(value, bool) else "a number"


def json_described(value: Any, most: int = 40) -> str:
    """A parsed JSON value for a message: what it is and how JSON writes it
    (``null``, ``a boolean true``, ``a string "0.5"``), cut to ``most``
    characters with an ellipsis."""
    if value is None:
        return "null"
    written = json.dumps(value, ensure_ascii=False)
    return f"{json_kind(value)} {written if len(written) <= most else written[:most - 1] + '…'}"


# How many unknown fields a refusal names; the rest it counts.
UNKNOWN_FIELDS_NAMED = 10


def unknown_fields(given: Iterable[Any], allowed: Iterable[str]) -> Optional[str]:
    """What to say of the keys of ``given`` that ``allowed`` does not hold
    (the first ``UNKNOWN_FIELDS_NAMED`` in sorted order, each cut to 40
    characters, and how many more), naming what is allowed: a sequence in
    its own order, a set sorted; None when every key is allowed."""
    allowed_names = list(allowed) if isinstance(allowed, (list, tuple)) else sorted(allowed)
    unknown = sorted(str(key)[:40] for key in given if key not in allowed_names)
    if not unknown:
        return None
    # A few name the mistake; all of a hundred thousand would make the answer as long as the request.
    named = ", ".join(unknown[:UNKNOWN_FIELDS_NAMED])
    more = len(unknown) - UNKNOWN_FIELDS_NAMED
    if more > 0:
        named += f" and {more:,} more"
    return f"unknown field(s): {named}; allowed: {', '.join(allowed_names)}"


def nul_in_query() -> Optional[str]:
    """What is wrong with a query parameter whose name or value holds a NUL
    character (no filter can match one, and PostgreSQL refuses it in a
    query), or None."""
    for name, value in request.args.items(multi=True):
        if NUL in name or NUL in value:
            return f"query parameter {name.replace(NUL, '')!r} must not contain NUL characters"
    return None


def query_not_utf8() -> Optional[str]:
    """What is wrong with a query whose bytes, raw or percent-escaped, are
    not UTF-8 text, or None. Werkzeug keeps such bytes as their escapes (a
    Latin-1 "café" is read ``caf%E9``), which no filter matches: the list
    would come back empty, as if nothing matched."""
    try:
        text = request.query_string.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"query is not UTF-8 text (byte {exc.start} is not)"
    for pair in text.split("&"):
        name, _, value = pair.partition("=")
        try:
            unquote_plus(name, errors="strict")
            unquote_plus(value, errors="strict")
        except UnicodeDecodeError:
            return (f"query parameter {name[:40]!r} is not UTF-8 text: a percent-escape in it (%E9, say) "
                    "decodes to no UTF-8 character")
    return None


def unstorable_text(value: Any) -> Optional[str]:
    """What a string (key or value) of a parsed JSON document holds that no
    database stores, and where, for a message: a NUL, or half of a surrogate
    pair (a JSON escape such as "\\ud800" alone). Iterative, so a deep
    document cannot exhaust the stack."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if NUL in item:
                return f"{_where(value, item)} must not contain NUL characters (\\u0000)"
            if not is_unicode(item):
                return f"{_where(value, item)} must not contain half of a surrogate pair (a lone \\ud800-\\udfff escape)"
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return None


def _where(document: Any, text: str) -> str:
    """Where in ``document`` the string ``text`` is, for a message: a path
    such as ``memories[3].observation``, or the object a key is in. A second
    walk, only for a document that is refused: the first names no paths,
    which for a large import cost more than the check itself."""
    pending: list[tuple[str, Any]] = [("", document)]
    while pending:
        path, item = pending.pop()
        if item is text:
            return path or "the body"
        if isinstance(item, dict):
            for key, member in item.items():
                if key is text:
                    return f"a field's name in {path}" if path else "a field's name"
                pending.append((f"{path}.{key}" if path else str(key), member))
        elif isinstance(item, list):
            pending.extend((f"{path}[{index}]", member) for index, member in enumerate(item))
    return "the body"


def page(items: list[dict], total: Total | int, limit: int, offset: int, key: str = "items") -> dict:
    """A page of a list. ``total`` is exact, or (an ``app.listing.Total``
    past its cap) the cap, with ``total_exact`` false."""
    if not isinstance(total, Total):
        total = Total(total, True)
    return {key: items, "total": total.count, "total_exact": total.exact, "limit": limit, "offset": offset}
