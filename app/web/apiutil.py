"""Helpers for JSON API endpoints, the host's and plugins' alike."""
from __future__ import annotations

from typing import Any

from flask import jsonify, request

from app.listing import Total

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


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
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(f"{name} must be a whole number, not {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ApiError(f"{name} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ApiError(f"{name} must be at most {maximum}")
    return value


def pagination() -> tuple[int, int]:
    """``limit`` (1..500, default 50) and ``offset`` (0 or more)."""
    return (int_arg("limit", DEFAULT_LIMIT, 1, MAX_LIMIT), int_arg("offset", 0, 0))


def json_body() -> dict[str, Any]:
    """The request's JSON object, or 415 (not JSON) / 400 (not an object)."""
    if not request.is_json:
        raise ApiError("send a JSON body with Content-Type: application/json", 415)
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise ApiError("the body must be a JSON object")
    return body


def page(items: list[dict], total: Total | int, limit: int, offset: int, key: str = "items") -> dict:
    """A page of a list. ``total`` is exact, or (an ``app.listing.Total``
    past its cap) the cap, with ``total_exact`` false."""
    if not isinstance(total, Total):
        total = Total(total, True)
    return {key: items, "total": total.count, "total_exact": total.exact, "limit": limit, "offset": offset}
